"""What runs cost: per run, stage and role, the prompt tokens (cached by the provider and not),
completion and reasoning tokens of the calls the run's artifacts used, priced on demand and in
batch from a price list (prices.toml, bundled with its date and source; a user's file given with
--prices replaces it model by model).

Each distinct call is counted once per run, in the stage of the first artifact that used it (as the
token table does); the total counts each call once however many runs used it, as a bill would.
Reasoning tokens are part of the completion tokens, as the API reports and bills them. A model
without a price, and a call whose tokens are unknown (the server sent no usage, a failure recorded
without its tokens), are named with their number of calls and their cost left unknown (null), never
counted as 0: a total that includes them is unknown too. Provider-cached prompt tokens in a batch
are billed at the cached rate scaled by the batch discount of input (the two discounts stack)."""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from memaudit.errors import BadInput
from memaudit.stages import stage_of as declared_stage
from memaudit.userfiles import read_regular

BUNDLED_PRICES = Path(__file__).with_name("prices.toml")
PRICE_FIELDS = ("input_per_mtok", "cached_input_per_mtok", "output_per_mtok", "batch_input_per_mtok",
                "batch_output_per_mtok")
MAX_PRICE_BYTES = 1024 * 1024  # a price list is a few kB
# USD per million tokens: a thousand times the dearest model listed anywhere; a larger price is a
# typo (and 1e308 sums to infinity).
MAX_PRICE = 100_000.0
MAX_HEADER_CHARS = 500


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    cached_input_per_mtok: float
    output_per_mtok: float
    batch_input_per_mtok: float
    batch_output_per_mtok: float

    def on_demand(self, u: "Usage") -> float:
        return (u.uncached * self.input_per_mtok + u.cached * self.cached_input_per_mtok
                + u.completion * self.output_per_mtok) / 1e6

    def batch(self, u: "Usage") -> float:
        discount = self.batch_input_per_mtok / self.input_per_mtok if self.input_per_mtok else 1.0
        return (u.uncached * self.batch_input_per_mtok + u.cached * self.cached_input_per_mtok * discount
                + u.completion * self.batch_output_per_mtok) / 1e6


@dataclass(frozen=True)
class PriceList:
    models: dict[str, Price]
    date: str
    source: str
    files: tuple[str, ...]
    bundled: "PriceList | None" = None  # with --prices: the list the models the file does not price come from

    def describe(self) -> dict:
        return {"date": self.date, "source": self.source, "files": list(self.files),
                **({"others": self.bundled.describe()} if self.bundled else {})}


@dataclass
class Usage:
    """Tokens of a set of calls; `cached` = prompt tokens the provider served from its prompt cache;
    `unknown` = calls among them whose tokens are not known (their counts here are 0, not measured)."""
    calls: int = 0
    prompt: int = 0
    cached: int = 0
    completion: int = 0
    reasoning: int = 0
    unknown: int = 0

    @property
    def uncached(self) -> int:
        return self.prompt - self.cached

    def add(self, other: "Usage") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def load_prices(path: Path | None = None) -> PriceList:
    """The bundled price list, with the models of `path` (when given) replacing or adding to it. The
    list then names `path` as its source (with the date and source the file states, if any) and the
    bundled list as where the models the file does not price come from."""
    bundled = _read_prices(BUNDLED_PRICES)
    if path is None:
        return bundled
    own = _read_prices(Path(path))
    source = f"{path}" + (f": {own.source}" if own.source else "")
    return PriceList({**bundled.models, **own.models}, own.date, source, (*bundled.files, str(path)), bundled)


def _read_prices(path: Path) -> PriceList:
    try:
        data = tomllib.loads(read_regular(path, limit=MAX_PRICE_BYTES).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadInput(f"not UTF-8 text (byte {exc.start}); a price file is TOML", file=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"not valid TOML: {exc}", file=str(path)) from None
    except RecursionError:  # tomllib nests as deep as the file: `[[[[…` runs out of stack
        raise BadInput("nested too deeply for a price list (tables of models, numbers and two strings)",
                       file=str(path)) from None
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise BadInput("[models] must be a table of models", file=str(path), field="models")
    return PriceList({name: _price(path, name, entry) for name, entry in models.items()},
                     _header(path, data, "date"), _header(path, data, "source"), (str(path),))


def _header(path: Path, data: dict, name: str) -> str:
    """The list's `date` or `source`: printed on the terminal and in reports, so one line of
    printable text (an escape sequence or a newline would rewrite what the terminal shows)."""
    value = data.get(name, "")
    if not isinstance(value, str) or len(value) > MAX_HEADER_CHARS or not value.isprintable():
        raise BadInput(f"{name} must be a line of printable text up to {MAX_HEADER_CHARS} characters", file=str(path),
                       field=name)
    return value


def _price(path: Path, name: str, entry) -> Price:
    if not name.isprintable():  # named on the terminal and in reports
        raise BadInput(f"a model's name must be printable text, got {name!r}", file=str(path), field="models")
    if not isinstance(entry, dict):
        raise BadInput(f"models.{name!r} must be a table", file=str(path), field=f"models.{name}")
    unknown = sorted(set(entry) - set(PRICE_FIELDS))
    missing = [f for f in PRICE_FIELDS if f not in entry]
    if unknown or missing:
        problem = f"unknown field {unknown[0]}" if unknown else f"missing {missing[0]}"
        raise BadInput(f"{problem} (fields: {', '.join(PRICE_FIELDS)})", file=str(path), field=f"models.{name}")
    bad = next((f for f in PRICE_FIELDS if isinstance(entry[f], bool) or not isinstance(entry[f], (int, float))
                or not math.isfinite(entry[f]) or not 0 <= entry[f] <= MAX_PRICE), None)
    if bad:
        raise BadInput(f"{bad} must be a number of USD per million tokens from 0 to {MAX_PRICE:,.0f}, got "
                       f"{entry[bad]!r}", file=str(path), field=f"models.{name}")
    return Price(*(float(entry[f]) for f in PRICE_FIELDS))


def call_usage(row) -> tuple[Usage, str | None]:
    """One recorded call's usage (a row of `calls.run_call_usage`), and why its tokens are unknown."""
    unknown = unknown_tokens(row)
    return Usage(1, row["prompt_tokens"], row["cached_tokens"], row["completion_tokens"], row["reasoning_tokens"],
                 int(unknown is not None)), unknown


def call_role(role: str) -> str:
    """The role a call is reported under: an adapter's sub-roles (`memory:amem_note`) as `memory`."""
    return role.split(":", 1)[0]


def stage_of(artifact: str) -> str:
    """The name of the stage that made an artifact (memaudit/stages.py: `episode:…` -> rollout,
    `recon:…:default:…` -> score, another variant: rescore …); an undeclared prefix names itself."""
    stage = declared_stage(artifact)
    return stage.name if stage is not None else artifact.split(":", 1)[0]


def unknown_tokens(row) -> str | None:
    """Why a recorded call's tokens are unknown (a row of `calls.run_call_usage`), or None when they
    are known. Every answered call spends prompt tokens, so a call recorded with none was not
    counted; a context overflow was refused before any token was spent (by memaudit's own count or
    by the server), so its zero is known."""
    if row["usage_unknown"]:
        return row["usage_unknown"]
    if row["prompt_tokens"] or row["completion_tokens"] or row["error_kind"] == "ContextOverflow":
        return None
    return "a failed call recorded without its tokens" if row["error_kind"] else "no tokens recorded"


@dataclass
class Priced:
    """Usage of one group of calls with its price: None when some of its calls cannot be priced,
    each counted in `unpriced_calls` under the reason (no price for its model, unknown tokens)."""
    usage: Usage = field(default_factory=Usage)
    usd_on_demand: float | None = 0.0
    usd_batch: float | None = 0.0
    models: set[str] = field(default_factory=set)
    unpriced: set[str] = field(default_factory=set)  # models without a price
    unpriced_calls: dict[str, int] = field(default_factory=dict)

    def add(self, model: str, usage: Usage, prices: PriceList, unknown: str | None = None) -> None:
        """Add calls of one model; `unknown` says why their tokens are unknown (usage.unknown of them)."""
        self.usage.add(usage)
        self.models.add(model)
        price = prices.models.get(model)
        if price is None:
            self.unpriced.add(model)
            self._unpriced(f"no price for model {model}", usage.calls)
        elif usage.unknown:
            self._unpriced(f"unknown tokens: {unknown or 'not recorded'}", usage.unknown)
        elif self.usd_on_demand is not None:
            self.usd_on_demand += price.on_demand(usage)
            self.usd_batch += price.batch(usage)

    def _unpriced(self, why: str, calls: int) -> None:
        self.unpriced_calls[why] = self.unpriced_calls.get(why, 0) + calls
        self.usd_on_demand = self.usd_batch = None

    def to_json(self) -> dict:
        u = self.usage
        return {"calls": u.calls, "prompt_tokens": u.prompt, "cached_prompt_tokens": u.cached,
                "uncached_prompt_tokens": u.uncached, "completion_tokens": u.completion,
                "reasoning_tokens": u.reasoning, "unknown_token_calls": u.unknown,
                "usd_on_demand": self.usd_on_demand, "usd_batch": self.usd_batch,
                "models": sorted(self.models), "unpriced": sorted(self.unpriced),
                "unpriced_calls": dict(sorted(self.unpriced_calls.items()))}


async def run_costs(store, runs: list[str], prices: PriceList) -> dict:
    """`{"prices", "runs": [{"run", "usd_on_demand", "usd_batch", "by_role", "by_stage", "estimate"}],
    "total"}` for `runs` (each call once per run; the total each call once)."""
    seen: dict[str, tuple] = {}
    out = []
    for run in runs:
        whole, by_role, by_stage = Priced(), {}, {}
        for r in await store.calls.run_call_usage(run):
            usage, unknown = call_usage(r)
            role, stage = call_role(r["role"]), stage_of(r["artifact"])
            for group in (whole, by_role.setdefault(role, Priced()),
                          by_stage.setdefault(stage, {}).setdefault(role, Priced())):
                group.add(r["model"], usage, prices, unknown)
            seen[r["key"]] = (r["model"], usage, unknown)
        out.append({"run": run, **whole.to_json(),
                    "by_role": {k: v.to_json() for k, v in sorted(by_role.items())},
                    "by_stage": {s: {k: v.to_json() for k, v in sorted(roles.items())}
                                 for s, roles in sorted(by_stage.items())},
                    "estimate": await store.plans.get(run)})
    total = Priced()
    for model, usage, unknown in seen.values():
        total.add(model, usage, prices, unknown)
    return {"prices": prices.describe(), "runs": out, "total": total.to_json()}
