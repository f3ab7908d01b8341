"""Settings: global options and per-role endpoints.

Precedence for every global option: flag > environment > config file > default. A role section
in the config file (`[roles.<name>]`) refines the global values for that role only.

    [default]                      # optional: same keys as a role section
    base_url = "https://api.example.com/v1"
    model = "my-model"

    [roles.memt_policy]            # a fleet: calls spread by least in-flight load; a fleet can be
                                   # given wherever a base URL can: a list here or under [default],
                                   # or comma-separated in --base-url / MEMAUDIT_BASE_URL
    base_url = ["http://gpu-a:8000/v1", "http://gpu-b:8000/v1"]
    model = "Mem-T-4B"
    backend = "vllm"
    temperature = 0.0
    max_tokens = 512
    context_window = 32768
    api_key_env = "MEMT_KEY"       # name of an environment variable; keys never go in files
    embed_model = "BAAI/bge-m3"    # embeddings of the memt system (default: the global embed_model)
    embed_base_url = "http://gpu-a:8001/v1"   # optional: an OpenAI-compatible /v1/embeddings endpoint

    [roles.slot_fill]
    rpm = 500                      # requests per minute this role's endpoint takes (and `tpm`: tokens);
                                   # every role sending to that endpoint shares it, shards their share of it

    [roles.recovery_judge]
    reasoning_effort = "low"       # sent to reasoning models (none|minimal|low|medium|high|xhigh)
    models = ["judge-a", "judge-b", "judge-c"]   # a judge panel (odd size; see memaudit/scoring/panel.py)

    [judges.judge-b]               # a panel judge with its own endpoint (same keys as a role section)
    base_url = "https://other.example.com/v1"
    api_key_env = "OTHER_KEY"
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from memaudit.errors import BadInput, redact_url
from memaudit.resources import data_dir
from memaudit.roles import GROUPS, MEMORY_PHASE, RECOVERY_JUDGE, embedded_max_tokens, groups_of, role_group
from memaudit.userfiles import read_regular

# The structured-output dialects (memaudit/llm/dialects/, which the model client reads): checked
# here, before any client exists, so a config file's mistake names its file and field.
BACKENDS = ("openai", "vllm", "llamacpp")
CACHE_MODES = ("rw", "replay", "refresh", "off")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")  # sent as reasoning_effort
# The role a judge panel answers: `[roles.<it>] models = [...]` names the panel, `[judges.NAME]`
# sections give a panel judge its own endpoint (memaudit/scoring/panel.py).
PANEL_ROLE = RECOVERY_JUDGE
EMBEDDED_MODEL = "smollm2-135m-instruct"
MAX_CONFIG_BYTES = 1024 * 1024  # a config file is a few kB
EMBEDDED_CONTEXT = 8192
BUNDLED_EMBED_MODEL = "all-MiniLM-L6-v2"  # the sentence model bundled with memaudit (memaudit/llm/embed.py)
EMBEDDING_GROUPS = groups_of(MEMORY_PHASE)  # the role groups whose memory systems embed; each may configure its own
REPO_ROOT = Path(__file__).resolve().parent.parent
PROMPTS_DIR = data_dir("prompts")
# The simulated user's text on the embedded model, in characters: the JSON grammar closes the string
# here, before the simulator's token cap (memaudit/roles.py) would cut the JSON. Configured
# endpoints: unbounded.
EMBEDDED_SIMULATOR_TEXT_CHARS = 400
# Repairs on the embedded model: none. An invalid structured answer of the 135M model is recorded as
# a failure at once: asked again it rarely came right, and each repair generated up to the role's
# cap again (on the demo, failed calls and their repairs took 247 of 1,025 s; perf/demo.py).
# Configured endpoints keep `repair_attempts`.
EMBEDDED_REPAIR_ATTEMPTS = 0
RATE_MAX = 1e12  # --rpm/--tpm: far above any provider's limit


@dataclass(frozen=True)
class RoleConfig:
    base_urls: tuple[str, ...]
    model: str
    backend: str
    temperature: float | None = None
    max_tokens: int | None = None
    context_window: int | None = None
    api_key: str | None = field(default=None, repr=False)
    max_tokens_cap: int | None = None
    reasoning_effort: str | None = None
    repair_attempts: int | None = None  # None: Settings.repair_attempts (the embedded model: none)


@dataclass(frozen=True)
class Settings:
    db: Path = Path("memaudit.db")
    base_url: str | None = None
    model: str = EMBEDDED_MODEL
    backend: str = "llamacpp"
    api_key: str | None = field(default=None, repr=False)
    concurrency: int = 32
    cache: str = "rw"
    seed: int = 0
    prompts_dir: Path = PROMPTS_DIR
    context_window: int | None = None
    role_sections: dict = field(default_factory=dict)
    # Retry knobs (transport only: never part of a cache key).
    max_retries: int = 6
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    timeout: float = 600.0
    repair_attempts: int = 2
    # Embeddings of the memory systems: a sentence-transformers model (default: the bundled one),
    # or a model behind an OpenAI-compatible /v1/embeddings endpoint. Roles may set their own.
    embed_model: str = BUNDLED_EMBED_MODEL
    embed_base_url: str | None = None
    # A Mem-T checkout whose own prompt templates the memt policy is driven with (Mem-T-4B on vLLM).
    memt_prompts: Path | None = None
    # `[judges.NAME]` sections: the endpoint (and settings) of a panel judge (memaudit/scoring/panel.py).
    judge_sections: dict = field(default_factory=dict)
    # Requests and tokens per minute of every endpoint (`--rpm`, `--tpm`; a section's `rpm`/`tpm` for
    # its own), shared out among the `rate_share` processes of a sharded study (memaudit/llm/ratelimit.py).
    rpm: float | None = None
    tpm: float | None = None
    rate_share: int = 1
    # Worker processes of the deployed libraries in environments of their own (adapters/environment.py)
    # alive at once: each holds one user's library (cognee's: about 0.5 GB), so a rollout runs at most
    # this many users of such a system at once.
    library_workers: int = 8

    def embedding(self, group: str) -> tuple[str, str | None, str | None]:
        """(model, endpoint or None for a local model, api key) of a role group's embeddings."""
        section = self.role_sections.get(group, {})
        base_url = section.get("embed_base_url") or (None if section.get("embed_model") else self.embed_base_url)
        key_env = section.get("api_key_env")
        api_key = os.environ.get(key_env) if key_env else self.api_key
        return section.get("embed_model") or self.embed_model, base_url, api_key

    @property
    def embedded(self) -> bool:
        """True when some role has no endpoint: the embedded server must be started."""
        return self.base_url is None and any(
            not _urls(self.role_sections.get(r, {}).get("base_url")) for r in GROUPS)

    def on_embedded(self, role: str) -> bool:
        """True when `role` is served by the embedded model (one request at a time)."""
        section = self.role_sections.get(role_group(role), {})
        return not _urls(section.get("base_url")) and self.model == EMBEDDED_MODEL

    def role(self, role: str) -> RoleConfig:
        section = self.role_sections.get(role_group(role), {})
        urls = _urls(section.get("base_url")) or _urls(self.base_url)
        own_endpoint = bool(_urls(section.get("base_url")))
        key_env = section.get("api_key_env")
        backend = section.get("backend") or (self.backend if (self.base_url or own_endpoint) else "llamacpp")
        window = section.get("context_window") or self.context_window
        on_embedded = self.on_embedded(role)
        if window is None and on_embedded:
            window = EMBEDDED_CONTEXT
        return RoleConfig(
            base_urls=urls,
            model=section.get("model") or self.model,
            backend=backend,
            temperature=section.get("temperature"),
            max_tokens=section.get("max_tokens"),
            context_window=window,
            api_key=os.environ.get(key_env) if key_env else self.api_key,
            max_tokens_cap=embedded_max_tokens().get(role_group(role)) if on_embedded else None,
            reasoning_effort=section.get("reasoning_effort"),
            repair_attempts=EMBEDDED_REPAIR_ATTEMPTS if on_embedded else None,
        )

    def panel_judge(self, name: str) -> "Settings":
        """The settings panel judge `name` is asked under: the recovery_judge section refined by
        `[judges.NAME]` (its endpoint, key, backend …); the model sent is `model` there, else NAME."""
        section = {k: v for k, v in self.role_sections.get(PANEL_ROLE, {}).items() if k != "models"}
        own = self.judge_sections.get(name, {})
        section = {**section, **own, "model": own.get("model", name)}
        return replace(self, role_sections={**self.role_sections, PANEL_ROLE: section})

    def rate_limits(self) -> dict[str | None, tuple[float | None, float | None]]:
        """(requests, tokens) per minute this process may send to each endpoint URL (None: to any
        other endpoint). A section's `rpm`/`tpm` is the budget of its endpoint (its own base URL,
        else the global one) for every role that sends there; set differently by two sections, an
        endpoint gets the smaller."""
        limits: dict = {None: (self.rpm, self.tpm)}
        for section in [*self.role_sections.values(), *self.judge_sections.values()]:
            if "rpm" not in section and "tpm" not in section:
                continue
            own = (section.get("rpm", self.rpm), section.get("tpm", self.tpm))
            for url in _urls(section.get("base_url")) or _urls(self.base_url):
                limits[url] = tuple(_smaller(a, b) for a, b in zip(limits.get(url, (None, None)), own))
        return {url: tuple(v / self.rate_share if v else None for v in pair) for url, pair in limits.items()}

    def credentials(self) -> tuple[list[str], list[str]]:
        """(every configured API key, every configured endpoint URL, which may carry one): the global
        key and each section's `api_key_env`; the global, role, judge and embeddings base URLs. What
        an answer must never bring back (memaudit/llm/secrets.py)."""
        sections = [*self.role_sections.values(), *self.judge_sections.values()]
        keys = [self.api_key, *(os.environ.get(s["api_key_env"]) for s in sections if s.get("api_key_env"))]
        urls = [*_urls(self.base_url), *_urls(self.embed_base_url)]
        for section in sections:
            urls += [*_urls(section.get("base_url")), *_urls(section.get("embed_base_url"))]
        return [k for k in keys if k], urls

    def with_embedded_url(self, url: str) -> "Settings":
        return replace(self, base_url=url, backend="llamacpp", model=EMBEDDED_MODEL)


def _smaller(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _urls(value) -> tuple[str, ...]:
    """A base URL or a fleet of them: a list, or one string with commas."""
    if not value:
        return ()
    parts = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return tuple(p.strip().rstrip("/") for p in parts if p.strip())


def url_problem(url: str) -> str | None:
    """What makes a base URL one memaudit cannot send requests to (None: an http(s) URL with a host)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return "a base URL must start with http:// or https://"
    if not rest.split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]:
        return "a base URL needs a host"
    return None


# -- the kinds of value a setting takes --------------------------------------------------------
class Kind:
    """How a setting's value is written: `check` says what is wrong with a config file's value (TOML
    gives it its type), or None; `parse` turns a flag's value, an environment variable's text or a
    config file's value into the setting, or raises BadInput naming where it came from. `cli` names
    the flag's type on the command line (memaudit/cli/common.py)."""
    cli = "text"

    def check(self, value) -> str | None:
        return None if isinstance(value, str) and value.strip() else "expected a non-empty string"

    def convert(self, value):
        return value

    def parse(self, value, where: str):
        try:
            typed = self.convert(value)
        except (TypeError, ValueError):
            typed = None  # not even of the right type: check() says what was expected
        problem = self.check(typed)
        if problem:  # a URL's credentials never reach the message
            raise BadInput(f"{problem}, got {redact_url(repr(value))}", field=where)
        return typed


class Text(Kind):
    convert = staticmethod(str)


class Url(Kind):
    """One endpoint URL (a trailing slash dropped)."""

    def check(self, value) -> str | None:
        return Kind.check(self, value) or url_problem(value)

    def convert(self, value):
        return str(value).rstrip("/")


class Urls(Kind):
    """An endpoint or a fleet of them: a list, or one string with commas; kept as one string with
    commas (split by `_urls`)."""

    def check(self, value) -> str | None:
        if isinstance(value, list) and value and all(not Kind.check(self, v) for v in value) \
                or not Kind.check(self, value):
            return next(filter(None, map(url_problem, _urls(value))), None)
        return "expected a URL or a list of URLs"

    def parse(self, value, where: str):
        for url in _urls(value):
            problem = url_problem(url)
            if problem:
                raise BadInput(f"{problem}, got {redact_url(url)!r}", field=where)
        return ",".join(_urls(value)) or None  # empty: no endpoint (the embedded model)


class FilePath(Kind):
    cli = "file"

    def convert(self, value):
        return Path(value)

    def check(self, value) -> str | None:
        return Kind.check(self, str(value) if isinstance(value, Path) else value)


class Folder(FilePath):
    """A directory; `existing`: one that must exist when the settings are read."""
    cli = "dir"

    def __init__(self, existing: bool = False):
        self.existing = existing

    def check(self, value) -> str | None:
        if self.existing and isinstance(value, Path) and not value.is_dir():
            return "expected an existing directory"
        return FilePath.check(self, value)


class Number(Kind):
    def __init__(self, low: float, high: float, *, whole: bool = False):
        self.low, self.high, self.whole = low, high, whole
        self.cli = "int" if whole else "float"

    def convert(self, value):
        return value if isinstance(value, (int, float)) else (int if self.whole else float)(value)

    def check(self, value) -> str | None:
        ok_type = isinstance(value, int) if self.whole else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok_type or not (self.low <= value <= self.high):
            span = f"an integer from {self.low} to {self.high}" if self.whole else \
                f"a number from {self.low:g} to {self.high:g}"
            return f"expected {span}"
        return None


class Choice(Kind):
    def __init__(self, choices: tuple[str, ...]):
        self.choices = choices

    def check(self, value) -> str | None:
        return None if value in self.choices else f"expected one of {', '.join(self.choices)}"


# -- the settings table ----------------------------------------------------------------------
@dataclass(frozen=True)
class Option:
    """One global setting, declared once: its flag, environment variables (the first one set wins),
    config-file key (under [default] or at the top level), kind, and a help line; its default is the
    Settings field's. The command line's global options and their help (memaudit/cli/common.py),
    the config file's keys and their checks, and load_settings derive from OPTIONS.
    Precedence: flag > environment > config file > default."""
    name: str  # the Settings field and the load_settings keyword
    flag: str | None  # None: set by the environment or the config file only
    env: tuple[str, ...]
    key: str | None  # None: not in a config file
    kind: Kind
    help: str  # `{default}` in it is filled in
    role_key: bool = False  # a role section ([roles.<name>], [judges.<name>]) may set it too

    @property
    def default(self):
        found = Settings.__dataclass_fields__.get(self.name)
        return None if found is None else found.default

    @property
    def help_text(self) -> str:
        text = self.help.format(default=self.default)
        return f"{text} [{self.env[0]}]" if self.env else text


# Where the bearer token is read from (no flag: a key never goes on a command line or in a file).
API_KEY_ENVS = ("MEMAUDIT_API_KEY", "OPENAI_API_KEY")
OPTIONS = (
    Option("db", "--db", ("MEMAUDIT_DB",), "db", FilePath(), "artifact store"),
    Option("base_url", "--base-url", ("MEMAUDIT_BASE_URL", "OPENAI_BASE_URL"), "base_url", Urls(),
           f"OpenAI-compatible endpoint; its bearer token is read from {' or '.join(reversed(API_KEY_ENVS))} "
           "(never stored, logged or part of a cache key)", role_key=True),
    Option("model", "--model", ("MEMAUDIT_MODEL",), "model", Text(), "model name sent to the endpoint", role_key=True),
    Option("backend", "--backend", ("MEMAUDIT_BACKEND",), "backend", Choice(BACKENDS), "structured-output dialect",
           role_key=True),
    Option("config", "--config", ("MEMAUDIT_CONFIG",), None, FilePath(),
           "TOML settings file: the [default] keys and per-role endpoints"),
    Option("concurrency", "--concurrency", ("MEMAUDIT_CONCURRENCY",), "concurrency", Number(1, 100_000, whole=True),
           "max in-flight calls per endpoint"),
    Option("cache", "--cache", ("MEMAUDIT_CACHE",), "cache", Choice(CACHE_MODES), "call cache mode"),
    Option("seed", "--seed", ("MEMAUDIT_SEED",), "seed", Number(-2**63, 2**63 - 1, whole=True),
           "base seed (of every request, the bootstrap, sampling)"),
    Option("prompts_dir", "--prompts", ("MEMAUDIT_PROMPTS",), None, Folder(), "directory with your own prompt files"),
    Option("embed_model", "--embed-model", ("MEMAUDIT_EMBED_MODEL",), "embed_model", Text(),
           "sentence-transformers model the memory systems embed with", role_key=True),
    Option("timeout", "--timeout", ("MEMAUDIT_TIMEOUT",), "timeout", Number(0.001, 86_400),
           "seconds to wait for one model response before retrying it (default {default:g})"),
    Option("memt_prompts", "--memt-prompts", ("MEMAUDIT_MEMT_PROMPTS",), "memt_prompts", Folder(existing=True),
           "a Mem-T checkout: drive memt with Mem-T's own templates"),
    Option("rpm", "--rpm", ("MEMAUDIT_RPM",), "rpm", Number(1, RATE_MAX),
           "requests per minute each endpoint takes, shared out across --shard's shards (default: no limit; a "
           "config section's rpm for its own endpoint)", role_key=True),
    Option("tpm", "--tpm", ("MEMAUDIT_TPM",), "tpm", Number(1, RATE_MAX),
           "tokens per minute each endpoint takes, shared out like --rpm", role_key=True),
    Option("library_workers", "--library-workers", ("MEMAUDIT_LIBRARY_WORKERS",), "library_workers",
           Number(1, 10_000, whole=True), "users of a deployed library open at once, each with its own store (a "
           "worker process for a library in its own environment) (default {default})"),
    Option("embed_base_url", None, ("MEMAUDIT_EMBED_BASE_URL",), "embed_base_url", Url(),
           "an OpenAI-compatible /v1/embeddings endpoint of the memory systems' embeddings", role_key=True),
    Option("context_window", None, (), "context_window", Number(1, 100_000_000, whole=True),
           "the models' context window in tokens", role_key=True),
    # Keys never go in files: a config file names the variable that holds one (api_key_env).
    Option("api_key", None, API_KEY_ENVS, None, Text(), "bearer token"),
)
OPTION = {o.name: o for o in OPTIONS}


def load_settings(*, env: dict | None = None, **given) -> Settings:
    """Resolve every setting of OPTIONS from `given` (flags, by name), the environment and the
    config file; then the rule between them: a configured endpoint speaks openai unless told
    otherwise and needs a model (without one, the embedded model's defaults stand)."""
    unknown = sorted(set(given) - set(OPTION))
    if unknown:
        raise TypeError(f"load_settings() got unknown settings: {', '.join(unknown)}")
    env = os.environ if env is None else env
    config = _resolved(OPTION["config"], given, env, {})
    file_default, sections, judges = _read_config(config) if config else ({}, {}, {})
    found = {o.name: _resolved(o, given, env, file_default) for o in OPTIONS if o.name != "config"}
    if found["api_key"] is None and file_default.get("api_key_env"):
        found["api_key"] = env.get(file_default["api_key_env"])
    if found["base_url"] is not None:
        found["backend"] = found["backend"] or "openai"
        if found["model"] is None:
            raise BadInput("--model (or MEMAUDIT_MODEL) is required with --base-url", field="model")
    chosen = {name: value for name, value in found.items() if value is not None}  # the rest: Settings' defaults
    return Settings(**chosen, role_sections=_with_defaults(sections, file_default), judge_sections=judges)


def _resolved(option: Option, given: dict, env, file_default: dict):
    """The flag, else the first of the option's environment variables that is set, else the config
    file's value; parsed. None when none is given (the default stands)."""
    if given.get(option.name) is not None:
        return option.kind.parse(given[option.name], option.flag or option.name)
    for name in option.env:
        if env.get(name):
            return option.kind.parse(env[name], name)
    if option.key in file_default:
        return option.kind.parse(file_default[option.key], option.key)
    return None


def _with_defaults(sections: dict, default: dict) -> dict:
    """[default]'s sampling keys apply to every role that does not set its own."""
    shared = {k: default[k] for k in ("temperature", "max_tokens", "reasoning_effort") if k in default}
    if not shared:
        return sections
    return {role: {**shared, **sections.get(role, {})} for role in GROUPS}


def _read_config(path: Path) -> tuple[dict, dict, dict]:
    import tomllib  # here: most commands run without a config file, and every start-up counts
    try:
        data = tomllib.loads(read_regular(path, limit=MAX_CONFIG_BYTES).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadInput(f"cannot read the config file: not UTF-8 text (byte {exc.start})", file=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"invalid TOML: {exc}", file=str(path)) from None
    for key in data:
        if key not in ("default", "roles", "judges") and key not in DEFAULT_KEYS:
            raise BadInput(f"unknown key {key!r}; a config file has [default], [roles.<name>], [judges.<name>] and "
                           "the keys of [default]", file=str(path), field=key)
    default = _checked(path, "default", data.get("default", {}), DEFAULT_KEYS)
    for key in DEFAULT_KEYS:
        if key in data:
            default.setdefault(key, _checked(path, "", {key: data[key]}, DEFAULT_KEYS)[key])
    roles = data.get("roles", {})
    if not isinstance(roles, dict):
        raise BadInput("must be a table of role sections ([roles.<name>])", file=str(path), field="roles")
    sections = {}
    for name, section in roles.items():
        if name not in GROUPS:
            raise BadInput(f"unknown role {name!r}; roles are {', '.join(GROUPS)}", file=str(path), field=f"roles.{name}")
        sections[name] = _checked(path, f"roles.{name}", section, PANEL_KEYS if name == PANEL_ROLE else ROLE_KEYS)
    judges = data.get("judges", {})
    if not isinstance(judges, dict):
        raise BadInput("must be a table of judge sections ([judges.<name>])", file=str(path), field="judges")
    return default, sections, {name: _checked(path, f"judges.{name}", section, ROLE_KEYS)
                               for name, section in judges.items()}


def _checked(path: Path, where: str, section, allowed: dict) -> dict:
    """`section` once every key is known and every value has its type and range; else one line
    naming the file, the section and the key."""
    if not isinstance(section, dict):
        raise BadInput("must be a table", file=str(path), field=where)
    for key, value in section.items():
        field_name = f"{where}.{key}" if where else key
        if key not in allowed:
            raise BadInput(f"unknown key {key!r}; known keys: {', '.join(sorted(allowed))}", file=str(path),
                           field=field_name)
        problem = allowed[key](value)
        if problem:  # a URL's credentials never reach the message
            raise BadInput(f"{problem}, got {redact_url(repr(value))}", file=str(path), field=field_name)
    return dict(section)


# Every key a config file may hold, with its check: [default] (or the top level) takes every
# setting's key and the role keys; a role section the role keys.
ROLE_KEYS = {
    **{o.key: o.kind.check for o in OPTIONS if o.role_key},
    "temperature": Number(0, 2).check, "max_tokens": Number(1, 10_000_000, whole=True).check,
    "api_key_env": Text().check, "reasoning_effort": Choice(REASONING_EFFORTS).check,
}
DEFAULT_KEYS = {**ROLE_KEYS, **{o.key: o.kind.check for o in OPTIONS if o.key}}


def _names(value) -> str | None:
    if isinstance(value, list) and all(not Text().check(v) for v in value):
        return None
    return "expected a list of model names"


# [roles.recovery_judge] may also name a judge panel (memaudit/scoring/panel.py).
PANEL_KEYS = {**ROLE_KEYS, "models": _names}
