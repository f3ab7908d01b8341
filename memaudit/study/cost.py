"""What runs cost: per run, stage and role, the prompt tokens (cached by the provider and not),
completion and reasoning tokens of the calls the run's artifacts used, priced on demand and in
batch from a price list (prices.toml, bundled with its date and source; a user's file given with
--prices replaces it model by model).

Each distinct call is counted once per run, in the stage of the first artifact that used it (as the
token table does); the total counts each call once however many runs used it, as a bill would.
Reasoning tokens are part of the completion tokens, as the API reports and bills them. A model
without a price is named and its cost left unknown (null), never counted as 0: a total that
includes it is unknown too. Provider-cached prompt tokens in a batch are billed at the cached rate
scaled by the batch discount of input (the two discounts stack)."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from memaudit.errors import BadInput

BUNDLED_PRICES = Path(__file__).with_name("prices.toml")
PRICE_FIELDS = ("input_per_mtok", "cached_input_per_mtok", "output_per_mtok", "batch_input_per_mtok",
                "batch_output_per_mtok")
# The first part of an artifact name (call_uses.artifact) says which stage made it.
STAGES = {"episode": "rollout", "recon": "score", "attr": "attribute", "act": "utilization"}


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

    def describe(self) -> dict:
        return {"date": self.date, "source": self.source, "files": list(self.files)}


@dataclass
class Usage:
    """Tokens of a set of calls; `cached` = prompt tokens the provider served from its prompt cache."""
    calls: int = 0
    prompt: int = 0
    cached: int = 0
    completion: int = 0
    reasoning: int = 0

    @property
    def uncached(self) -> int:
        return self.prompt - self.cached

    def add(self, other: "Usage") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def load_prices(path: Path | None = None) -> PriceList:
    """The bundled price list, with the models of `path` (when given) replacing or adding to it."""
    bundled = _read_prices(BUNDLED_PRICES)
    if path is None:
        return bundled
    own = _read_prices(Path(path))
    return PriceList({**bundled.models, **own.models}, own.date or bundled.date, own.source or bundled.source,
                     (*bundled.files, str(path)))


def _read_prices(path: Path) -> PriceList:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise BadInput(f"cannot read the price file: {exc.strerror}", file=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"not valid TOML: {exc}", file=str(path)) from None
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise BadInput("[models] must be a table of models", file=str(path), field="models")
    return PriceList({name: _price(path, name, entry) for name, entry in models.items()},
                     str(data.get("date", "")), str(data.get("source", "")), (str(path),))


def _price(path: Path, name: str, entry) -> Price:
    if not isinstance(entry, dict):
        raise BadInput(f"models.{name!r} must be a table", file=str(path), field=f"models.{name}")
    unknown = sorted(set(entry) - set(PRICE_FIELDS))
    missing = [f for f in PRICE_FIELDS if f not in entry]
    if unknown or missing:
        problem = f"unknown field {unknown[0]}" if unknown else f"missing {missing[0]}"
        raise BadInput(f"{problem} (fields: {', '.join(PRICE_FIELDS)})", file=str(path), field=f"models.{name}")
    bad = next((f for f in PRICE_FIELDS if isinstance(entry[f], bool) or not isinstance(entry[f], (int, float))
                or entry[f] < 0), None)
    if bad:
        raise BadInput(f"{bad} must be a non-negative number of USD per million tokens, got {entry[bad]!r}",
                       file=str(path), field=f"models.{name}")
    return Price(*(float(entry[f]) for f in PRICE_FIELDS))


def call_role(role: str) -> str:
    """The role a call is reported under: an adapter's sub-roles (`memory:amem_note`) as `memory`."""
    return role.split(":", 1)[0]


def stage_of(artifact: str) -> str:
    """`episode:…` -> rollout, `recon:…:default:…` -> score (another variant: rescore) …"""
    parts = artifact.split(":")
    if parts[0] == "recon" and len(parts) > 3 and parts[3] != "default":
        return "rescore"
    return STAGES.get(parts[0], parts[0])


@dataclass
class Priced:
    """Usage of one group of calls with its price (None when some model of it has no price)."""
    usage: Usage = field(default_factory=Usage)
    usd_on_demand: float | None = 0.0
    usd_batch: float | None = 0.0
    models: set[str] = field(default_factory=set)
    unpriced: set[str] = field(default_factory=set)

    def add(self, model: str, usage: Usage, prices: PriceList) -> None:
        self.usage.add(usage)
        self.models.add(model)
        price = prices.models.get(model)
        if price is None:
            self.unpriced.add(model)
            self.usd_on_demand = self.usd_batch = None
        elif self.usd_on_demand is not None:
            self.usd_on_demand += price.on_demand(usage)
            self.usd_batch += price.batch(usage)

    def to_json(self) -> dict:
        u = self.usage
        return {"calls": u.calls, "prompt_tokens": u.prompt, "cached_prompt_tokens": u.cached,
                "uncached_prompt_tokens": u.uncached, "completion_tokens": u.completion,
                "reasoning_tokens": u.reasoning, "usd_on_demand": self.usd_on_demand, "usd_batch": self.usd_batch,
                "models": sorted(self.models), "unpriced": sorted(self.unpriced)}


async def run_costs(store, runs: list[str], prices: PriceList) -> dict:
    """`{"prices", "runs": [{"run", "usd_on_demand", "usd_batch", "by_role", "by_stage", "estimate"}],
    "total"}` for `runs` (each call once per run; the total each call once)."""
    seen: dict[str, tuple] = {}
    out = []
    for run in runs:
        whole, by_role, by_stage = Priced(), {}, {}
        for r in await store.calls.run_call_usage(run):
            usage = Usage(1, r["prompt_tokens"], r["cached_tokens"], r["completion_tokens"], r["reasoning_tokens"])
            role, stage = call_role(r["role"]), stage_of(r["artifact"])
            for group in (whole, by_role.setdefault(role, Priced()),
                          by_stage.setdefault(stage, {}).setdefault(role, Priced())):
                group.add(r["model"], usage, prices)
            seen[r["key"]] = (r["model"], usage)
        out.append({"run": run, **whole.to_json(),
                    "by_role": {k: v.to_json() for k, v in sorted(by_role.items())},
                    "by_stage": {s: {k: v.to_json() for k, v in sorted(roles.items())}
                                 for s, roles in sorted(by_stage.items())},
                    "estimate": await store.plans.get(run)})
    total = Priced()
    for model, usage in seen.values():
        total.add(model, usage, prices)
    return {"prices": prices.describe(), "runs": out, "total": total.to_json()}
