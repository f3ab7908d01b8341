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
from memaudit.roles import GROUPS, embedded_max_tokens, groups_of, role_group
from memaudit.userfiles import read_regular

# The structured-output dialects (memaudit/llm/dialects/, which the model client reads): checked
# here, before any client exists, so a config file's mistake names its file and field.
BACKENDS = ("openai", "vllm", "llamacpp")
CACHE_MODES = ("rw", "replay", "refresh", "off")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")  # sent as reasoning_effort
EMBEDDED_MODEL = "smollm2-135m-instruct"
MAX_CONFIG_BYTES = 1024 * 1024  # a config file is a few kB
EMBEDDED_CONTEXT = 8192
BUNDLED_EMBED_MODEL = "all-MiniLM-L6-v2"  # the sentence model bundled with memaudit (memaudit/llm/embed.py)
EMBEDDING_GROUPS = groups_of("memory")  # the role groups whose memory systems embed; each may configure its own
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
        section = {k: v for k, v in self.role_sections.get("recovery_judge", {}).items() if k != "models"}
        own = self.judge_sections.get(name, {})
        section = {**section, **own, "model": own.get("model", name)}
        return replace(self, role_sections={**self.role_sections, "recovery_judge": section})

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


def _check_urls(value, field: str) -> None:
    for url in _urls(value):
        problem = url_problem(url)
        if problem:
            raise BadInput(f"{problem}, got {redact_url(url)!r}", field=field)


def load_settings(*, db=None, base_url=None, model=None, backend=None, config=None, concurrency=None,
                  cache=None, seed=None, prompts_dir=None, context_window=None, embed_model=None,
                  memt_prompts=None, timeout=None, rpm=None, tpm=None, env: dict | None = None) -> Settings:
    """Resolve settings from flags (keyword arguments), the environment and the config file."""
    env = os.environ if env is None else env
    config = config or env.get("MEMAUDIT_CONFIG")
    file_default, sections, judges = _read_config(Path(config)) if config else ({}, {}, {})

    def pick(flag, env_names, file_key, default):
        if flag is not None:
            return flag
        for name in env_names:
            if env.get(name):
                return env[name]
        if file_key in file_default:
            return file_default[file_key]
        return default

    # One base URL or a fleet, kept as one comma-separated string (split by `_urls`).
    url = ",".join(_urls(pick(base_url, ("MEMAUDIT_BASE_URL", "OPENAI_BASE_URL"), "base_url", None))) or None
    _check_urls(url, "base_url")
    resolved_model = pick(model, ("MEMAUDIT_MODEL",), "model", None)
    resolved_backend = pick(backend, ("MEMAUDIT_BACKEND",), "backend", None)
    if url is None:
        resolved_backend = resolved_backend or "llamacpp"
        resolved_model = resolved_model or EMBEDDED_MODEL
    else:
        resolved_backend = resolved_backend or "openai"
        if resolved_model is None:
            raise BadInput("--model (or MEMAUDIT_MODEL) is required with --base-url", field="model")
    if resolved_backend not in BACKENDS:
        raise BadInput(f"unknown backend {resolved_backend!r}; choose one of {', '.join(BACKENDS)}",
                       field="backend")
    cache_mode = pick(cache, ("MEMAUDIT_CACHE",), "cache", "rw")
    if cache_mode not in CACHE_MODES:
        raise BadInput(f"unknown cache mode {cache_mode!r}; choose one of {', '.join(CACHE_MODES)}",
                       field="cache")
    try:
        conc = int(pick(concurrency, ("MEMAUDIT_CONCURRENCY",), "concurrency", 32))
        seed_value = int(pick(seed, ("MEMAUDIT_SEED",), "seed", 0))
    except ValueError as exc:
        raise BadInput(f"expected an integer: {exc}", field="concurrency/seed") from None
    if conc < 1:
        raise BadInput("concurrency must be at least 1", field="concurrency")
    seconds = _timeout(pick(timeout, ("MEMAUDIT_TIMEOUT",), "timeout", Settings.timeout))
    per_minute = {name: _per_minute(name, pick(flag, (f"MEMAUDIT_{name.upper()}",), name, None))
                  for name, flag in (("rpm", rpm), ("tpm", tpm))}
    key_env = file_default.get("api_key_env")
    api_key = env.get("MEMAUDIT_API_KEY") or env.get("OPENAI_API_KEY") or (env.get(key_env) if key_env else None)
    window = context_window if context_window is not None else file_default.get("context_window")
    memt_dir = pick(memt_prompts, ("MEMAUDIT_MEMT_PROMPTS",), "memt_prompts", None)
    if memt_dir is not None and not Path(memt_dir).is_dir():
        raise BadInput("--memt-prompts must be a Mem-T checkout directory", file=str(memt_dir), field="memt_prompts")
    embed_url = pick(None, ("MEMAUDIT_EMBED_BASE_URL",), "embed_base_url", None)
    _check_urls(embed_url, "embed_base_url")
    return Settings(
        db=Path(pick(db, ("MEMAUDIT_DB",), "db", "memaudit.db")),
        base_url=url,
        model=resolved_model,
        backend=resolved_backend,
        api_key=api_key,
        concurrency=conc,
        cache=cache_mode,
        seed=seed_value,
        prompts_dir=Path(prompts_dir or env.get("MEMAUDIT_PROMPTS") or PROMPTS_DIR),
        context_window=int(window) if window else None,
        role_sections=_with_defaults(sections, file_default),
        embed_model=str(pick(embed_model, ("MEMAUDIT_EMBED_MODEL",), "embed_model", BUNDLED_EMBED_MODEL)),
        embed_base_url=str(embed_url).rstrip("/") if embed_url else None,
        memt_prompts=Path(memt_dir) if memt_dir is not None else None,
        timeout=seconds,
        judge_sections=judges,
        **per_minute,
    )


def _timeout(value) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not 0 < seconds <= 86_400:
        raise BadInput(f"the timeout is seconds per request attempt, more than 0 and at most 86400; got {value!r}",
                       field="timeout")
    return seconds


def _per_minute(name: str, value) -> float | None:
    """`--rpm`/`--tpm`: a number of requests (tokens) per minute, at least 1; None: no budget."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = 0.0
    if not 1 <= number <= RATE_MAX:
        raise BadInput(f"--{name} is per minute, from 1 to {RATE_MAX:g}; got {value!r}", field=name)
    return number


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
        sections[name] = _checked(path, f"roles.{name}", section, PANEL_KEYS if name == "recovery_judge" else ROLE_KEYS)
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


def _text(value) -> str | None:
    return None if isinstance(value, str) and value.strip() else "expected a non-empty string"


def _urls_value(value) -> str | None:
    if isinstance(value, list) and value and all(not _text(v) for v in value) or not _text(value):
        return next(filter(None, map(url_problem, _urls(value))), None)
    return "expected a URL or a list of URLs"


def _url_value(value) -> str | None:
    return _text(value) or url_problem(value)


def _number(low: float, high: float, *, whole: bool = False):
    kind = "a whole number" if whole else "a number"

    def check(value) -> str | None:
        ok_type = isinstance(value, int) if whole else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok_type or not (low <= value <= high):
            return f"expected {kind} from {low:g} to {high:g}"
        return None
    return check


def _one_of(choices):
    return lambda value: None if value in choices else f"expected one of {', '.join(choices)}"


# Every key a config file may hold, with its check (one place: [default] takes the role keys too).
ROLE_KEYS = {
    "base_url": _urls_value, "model": _text, "backend": _one_of(BACKENDS),
    "temperature": _number(0, 2), "max_tokens": _number(1, 10_000_000, whole=True),
    "context_window": _number(1, 100_000_000, whole=True), "api_key_env": _text,
    "reasoning_effort": _one_of(REASONING_EFFORTS), "embed_model": _text, "embed_base_url": _url_value,
    "rpm": _number(1, RATE_MAX), "tpm": _number(1, RATE_MAX),
}
DEFAULT_KEYS = {
    **ROLE_KEYS, "db": _text, "concurrency": _number(1, 100_000, whole=True), "cache": _one_of(CACHE_MODES),
    "seed": _number(-2**63, 2**63 - 1, whole=True), "memt_prompts": _text, "timeout": _number(0.001, 86_400),
}


def _names(value) -> str | None:
    if isinstance(value, list) and all(not _text(v) for v in value):
        return None
    return "expected a list of model names"


# [roles.recovery_judge] may also name a judge panel (memaudit/scoring/panel.py).
PANEL_KEYS = {**ROLE_KEYS, "models": _names}
