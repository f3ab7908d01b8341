"""Templates read from code: the published runner builds its assistant, simulator and
preference-judge requests inside functions (f-strings, `+`, `"sep".join(...)` over a loop,
`x if y else ""`). This module finds such an expression in a checkout's source with `ast` (nothing
is executed) and turns it into memaudit's template syntax: literal text stays byte for byte, each
value becomes `{{name}}` under the name memaudit fills it with. The caller (memaudit/published/rollout.py)
says which function and variable hold a piece and what each of its values means here, by the
value's shape: a variable `name`, a field `x["f"]` / `x.get("f", …)` (`f`), `self.attr` (`attr`),
`n + 1` (`n+1`), `len(x)` (`len x`), `str(x)` (`str x`), a join over `xs` (`join xs`), a condition
on `v` (`if v`).
Anything else is refused: a checkout whose code has another shape fails with one line, never with
a request that is silently not the published one."""
from __future__ import annotations

import ast
import string
from dataclasses import dataclass

from memaudit.prompts import PLACEHOLDER, VERBATIM_SECTIONS


class Shape(Exception):
    """The code is not of the shape the pack expects (the message says what was found)."""


@dataclass(frozen=True)
class Join:
    """`sep.join(item for target in source)`: the item's template, the separator, the loop names."""
    sep: str
    item: ast.expr
    targets: tuple[str, ...]
    source: str
    skips_empty: bool  # `… for x in xs if x`


def function(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    """`Class.method` or `function` at module level, defined once (Python keeps the last definition)."""
    scope, found = tree.body, None
    for part in qualname.split("."):
        named = [n for n in scope if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part]
        if not named:
            raise Shape(f"no {qualname}")
        if len(named) > 1:
            raise Shape(f"{qualname} is defined more than once")
        found = named[0]
        scope = found.body
    if not isinstance(found, ast.FunctionDef):
        raise Shape(f"{qualname} is not a function")
    return found


def module_statements(tree: ast.Module):
    """Every statement that runs at module level, those inside `if`, `try`, `with` and loops too;
    not the bodies of functions and classes."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
            for handler in getattr(node, "handlers", ()):
                todo.extend(handler.body)


def assigned_names(node: ast.stmt) -> set[str]:
    """The names a statement binds (assignments of every kind, loops, `with … as`, imports, definitions)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if isinstance(node, ast.AnnAssign) and node.value is None:
        return set()  # `name: type` declares, binds nothing
    targets = {ast.Assign: lambda n: n.targets, ast.AnnAssign: lambda n: [n.target],
               ast.AugAssign: lambda n: [n.target], ast.For: lambda n: [n.target],
               ast.AsyncFor: lambda n: [n.target],
               ast.With: lambda n: [i.optional_vars for i in n.items if i.optional_vars is not None],
               ast.AsyncWith: lambda n: [i.optional_vars for i in n.items if i.optional_vars is not None]}
    bound = targets.get(type(node), lambda n: [])(node)
    return {sub.id for target in bound for sub in ast.walk(target) if isinstance(sub, ast.Name)}


def in_order(fn: ast.FunctionDef, kind: type) -> list:
    """Every sub-node of `kind`, in source order."""
    return sorted((n for n in ast.walk(fn) if isinstance(n, kind)), key=lambda n: (n.lineno, n.col_offset))


def assigned(fn: ast.FunctionDef, name: str, kind: type = ast.expr) -> ast.expr:
    """The value of the first `name = …` in `fn` whose value is a `kind`."""
    for node in in_order(fn, ast.Assign):
        if isinstance(node.value, kind) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
    raise Shape(f"{fn.name} assigns no {name}")


def attribute_assigned(fn: ast.FunctionDef, attr: str) -> ast.expr:
    """The value of the one `self.attr = …` in `fn`."""
    found = [node.value for node in in_order(fn, ast.Assign)
             if any(isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                    and t.value.id == "self" for t in node.targets)]
    if len(found) != 1:
        raise Shape(f"{fn.name} sets self.{attr} {len(found)} times, not once")
    return found[0]


def augmented(fn: ast.FunctionDef, name: str) -> ast.expr:
    """The value of the one `name += …` in `fn` (a text built line by line in a loop)."""
    found = [node.value for node in in_order(fn, ast.AugAssign)
             if isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name) and node.target.id == name]
    if len(found) != 1:
        raise Shape(f"{fn.name} adds to {name} {len(found)} times, not once")
    return found[0]


def keyword_literal(fn: ast.FunctionDef, method: str, keyword: str):
    """The literal value of `keyword=` in the one call of `….method(…)` in `fn`."""
    calls = [node for node in in_order(fn, ast.Call)
             if isinstance(node.func, ast.Attribute) and node.func.attr == method]
    if len(calls) != 1:
        raise Shape(f"{fn.name} calls {method} {len(calls)} times, not once")
    value = next((k.value for k in calls[0].keywords if k.arg == keyword), None)
    if value is None:
        raise Shape(f"{fn.name} passes no {keyword} to {method}")
    try:
        return ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise Shape(f"the {keyword} {fn.name} passes is not a literal") from None


def message_text(fn: ast.FunctionDef, role: str) -> str:
    """The content of the one literal chat message `{"role": role, "content": "…"}` in `fn`."""
    found = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):
            fields = {k.value: v for k, v in zip(node.keys, node.values)}
            role_value = fields.get("role")
            if isinstance(role_value, ast.Constant) and role_value.value == role and "content" in fields:
                found.append(fields["content"])
    if len(found) != 1:
        raise Shape(f"{fn.name} has {len(found)} {role} messages, not one")
    return text(found[0])


def returned(fn: ast.FunctionDef) -> list[ast.expr]:
    """The values `fn` returns, in source order."""
    return [n.value for n in in_order(fn, ast.Return) if n.value is not None]


def appended(fn: ast.FunctionDef, name: str) -> ast.expr:
    """The argument of the first `name.append(…)` in `fn`."""
    for node in in_order(fn, ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr == "append" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == name and len(node.args) == 1:
            return node.args[0]
    raise Shape(f"{fn.name} appends nothing to {name}")


def text(node: ast.expr) -> str:
    """A string literal, which memaudit's templates can carry verbatim."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        raise Shape(f"expected a string literal, found {type(node).__name__}")
    return verbatim(node.value)


def key(node: ast.expr) -> str:
    """What a value is, by its shape (see the module docstring)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    if isinstance(node, ast.Subscript):  # xs[:20]
        return key(node.value)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and node.args and isinstance(node.args[0], ast.Constant):
        return str(node.args[0].value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("len", "str") \
            and len(node.args) == 1:
        return f"{node.func.id} {key(node.args[0])}"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.right, ast.Constant) \
            and node.right.value == 1:
        return f"{key(node.left)}+1"
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):  # a field with a fallback field
        return key(node.values[0])
    if isinstance(node, ast.IfExp):
        return f"if {key(node.test)}"
    if _is_join(node):
        return f"join {join(node).source}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "enumerate" and node.args:
        return key(node.args[0])
    raise Shape(f"a value of unexpected shape: {type(node).__name__}")


def template(node: ast.expr, names: dict[str, str]) -> str:
    """The expression as a memaudit template: literals verbatim, each value `{{names[key]}}`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return text(node)
    if isinstance(node, ast.JoinedStr):
        return "".join(template(v, names) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        if node.conversion != -1 or node.format_spec is not None:
            raise Shape("a formatted value with a conversion or format spec")
        return template(node.value, names)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and key_or_none(node) is None:
        return template(node.left, names) + template(node.right, names)
    found = key(node)
    if found not in names:
        raise Shape(f"an unexpected value ({found})")
    return "{{" + names[found] + "}}"


def key_or_none(node: ast.expr) -> str | None:
    try:
        return key(node)
    except Shape:
        return None


def _is_join(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" \
        and isinstance(node.func.value, ast.Constant) and len(node.args) == 1


def join(node: ast.expr) -> Join:
    """`sep.join(item for … in source [if item])`, or `sep.join(source)` (the items themselves)."""
    if not _is_join(node):
        raise Shape("expected a join")
    sep, arg = text(node.func.value), node.args[0]
    if not isinstance(arg, (ast.GeneratorExp, ast.ListComp)):
        name = key(arg)
        return Join(sep, ast.Name(name), (name,), name, False)
    if len(arg.generators) != 1:
        raise Shape("a join over more than one loop")
    loop = arg.generators[0]
    target = loop.target
    names = tuple(t.id for t in target.elts) if isinstance(target, ast.Tuple) else (target.id,)
    skips = [ast.dump(c) for c in loop.ifs] == [ast.dump(ast.Name(names[0], ast.Load()))]
    if loop.ifs and not skips:
        raise Shape("a join with a condition other than skipping empty items")
    return Join(sep, arg.elt, names, key(loop.iter), skips)


def conditional(node: ast.expr) -> tuple[str, ast.expr]:
    """`body if test else ""`: the test's key and the body."""
    if not isinstance(node, ast.IfExp) or text(node.orelse) != "":
        raise Shape('expected `… if … else ""`')
    return key(node.test), node.body


def find(node: ast.AST, kind: type, test=lambda n: True) -> ast.AST:
    """The first sub-node of `kind` (breadth first) that passes `test`."""
    for sub in ast.walk(node):
        if isinstance(sub, kind) and test(sub):
            return sub
    raise Shape(f"no {kind.__name__} where one was expected")


def find_join(node: ast.AST) -> Join:
    """The first join inside `node`."""
    return join(find(node, ast.Call, _is_join))


def format_template(value: str, fills: dict[str, str]) -> str:
    """A `str.format` template in memaudit's syntax: `{x}` -> `{{fills[x]}}`, `{{`/`}}` -> `{`/`}`;
    every placeholder of `fills` used, no other."""
    parts, seen = [], set()
    for literal, name, spec, conversion in string.Formatter().parse(value):
        parts.append(verbatim(literal))
        if name is None:
            continue
        if name not in fills or spec or conversion:
            raise Shape(f"has an unexpected placeholder {{{name}}}")
        seen.add(name)
        parts.append("{{" + fills[name] + "}}")
    missing = sorted(set(fills) - seen)
    if missing:
        raise Shape(f"lacks the placeholder {{{missing[0]}}}")
    return "".join(parts)


def verbatim(value: str) -> str:
    """Text a verbatim prompt file can carry as it is: nothing that reads as a `{{placeholder}}`,
    no line that reads as a section heading."""
    if PLACEHOLDER.search(value) or any(line in VERBATIM_SECTIONS for line in value.split("\n")):
        raise Shape("holds text memaudit's prompt files cannot carry verbatim")
    return value
