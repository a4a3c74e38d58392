"""kport's configuration: every KPORT_* variable, the state home, and one way to build settings.

runners is the bottom layer every other package depends on, so the one settings module lives here.
Precedence: explicit overrides (CLI flags) > environment > ``$KPORT_HOME/config.toml`` > defaults.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from runners.errors import KportError

# Every environment variable kport reads, with what it means. Nothing else reads os.environ for
# KPORT_* names; tests check this table against the code.
ENV_VARS: dict[str, str] = {
    "KPORT_HOME": "where kport keeps all its state (KB store, build cache, sessions, runs)",
    "KPORT_EXPERT_CACHE": "tests only: where the expert-kernel conformance tests keep the "
                          "sources they download (default ~/.cache/kport/expert-sources)",
    "KPORT_CXX": "C++ compiler command for the simulators (clang++ >= 15), e.g. 'clang++-19'",
    "KPORT_MODEL": "LLM as provider:model for langchain's init_chat_model, e.g. 'openai:gpt-4o'",
    "KPORT_BASE_URL": "base URL of an OpenAI-compatible server (mlx_lm.server, vLLM, llama-server)",
    "KPORT_CHROMA_URL": "URL of a shared Chroma server; unset means the local on-disk store",
    "KPORT_EMBED_MODEL": "sentence-transformers model name or path for KB embeddings",
    "KPORT_SIM_THREADS": "OS threads the simulators spread threadgroups over (default: all cores)",
    "KPORT_SIM_TIMEOUT": "seconds a simulated launch may run before it is killed (default 60)",
    "KPORT_SIM_CHECKS": "'full' (bounds, races, uninitialised reads; default), 'fast' (none), "
                        "or a comma list of bounds, race, uninit",
    "KPORT_SIM_WORK_ITEMS": "'auto' (default: kernels run in work-item loops where provably "
                            "safe) or 'off' (fibers, or the plain thread loop for kernels "
                            "without barriers; for comparisons)",
    "KPORT_COMPILE_TIMEOUT": "seconds one simulator compile may take before it fails (default 120)",
    "KPORT_UNSANDBOXED": "1: run outside code even where the OS gives no jail (unsafe; recorded)",
    "KPORT_BUILD_CACHE": "where compiled simulator kernels are kept (default "
                         "$KPORT_HOME/cache/build): share one between homes or keep it in a CI "
                         "cache; entries are keyed by source, compiler, shim and CPU",
    "KPORT_EMBED_CACHE": "where KB document vectors are kept (default $KPORT_HOME/cache/embed): "
                         "share one between homes; entries are keyed by model files and text",
}

# Keys of config.toml and the env variable each one mirrors.
_FIELD_ENV = {
    "cxx": "KPORT_CXX",
    "model": "KPORT_MODEL",
    "base_url": "KPORT_BASE_URL",
    "chroma_url": "KPORT_CHROMA_URL",
    "embed_model": "KPORT_EMBED_MODEL",
    "sim_threads": "KPORT_SIM_THREADS",
    "sim_timeout": "KPORT_SIM_TIMEOUT",
    "sim_checks": "KPORT_SIM_CHECKS",
    "sim_work_items": "KPORT_SIM_WORK_ITEMS",
    "compile_timeout": "KPORT_COMPILE_TIMEOUT",
    "unsandboxed": "KPORT_UNSANDBOXED",
    "build_cache": "KPORT_BUILD_CACHE",
    "embed_cache": "KPORT_EMBED_CACHE",
}


# What KPORT_SIM_CHECKS can name: bounds of buffers and threadgroup memory (and writes to
# inputs), threadgroup-memory races, reads of threadgroup memory no thread wrote.
CHECKS = ("bounds", "race", "uninit")


class ConfigError(KportError):
    """Bad configuration; the message names the file or variable, the key and the fix."""


class Settings(BaseModel):
    """Frozen settings of one kport process. Paths are all under ``home``; the build and
    embedding caches too, unless KPORT_BUILD_CACHE / KPORT_EMBED_CACHE move them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    home: Path
    cxx: str | None = None
    model: str | None = None
    base_url: str | None = None
    chroma_url: str | None = None
    embed_model: str = "all-MiniLM-L6-v2"
    sim_threads: int = Field(default=0, ge=0, le=4096)  # 0: use every core
    sim_timeout: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    sim_checks: str = "full"  # normalised: "full", "fast" or a sorted comma list of CHECKS
    sim_work_items: Literal["auto", "off"] = "auto"
    compile_timeout: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    unsandboxed: bool = False
    build_cache: Path | None = None  # None: home / "cache" / "build"
    embed_cache: Path | None = None  # None: home / "cache" / "embed"

    @field_validator("sim_checks")
    @classmethod
    def _check_list(cls, value: str) -> str:
        parts = {p.strip() for p in value.lower().split(",") if p.strip()}
        if parts in ({"full"}, {"fast"}):
            return parts.pop()
        if not parts or parts - set(CHECKS):
            raise ValueError("must be 'full', 'fast' or a comma list of " + ", ".join(CHECKS))
        return "full" if parts == set(CHECKS) else ",".join(c for c in CHECKS if c in parts)

    @property
    def sim_check_set(self) -> frozenset[str]:
        """The simulators' checks (subset of CHECKS); empty for 'fast' (an uninstrumented
        build)."""
        if self.sim_checks == "fast":
            return frozenset()
        return frozenset(CHECKS) if self.sim_checks == "full" else frozenset(
            self.sim_checks.split(","))

    @property
    def kb_dir(self) -> Path:
        """The local chromadb store of the knowledge base."""
        return self.home / "kb"

    @property
    def build_cache_dir(self) -> Path:
        """Compiled simulator kernels, keyed by content hash (the key holds everything that
        changes a build, so homes, users of one machine or CI runs may share the folder)."""
        return (self.build_cache or self.home / "cache" / "build").expanduser()

    @property
    def embed_cache_dir(self) -> Path:
        """Document vectors of the KB's embedding models, keyed by the model's files and the
        text (so homes may share the folder)."""
        return (self.embed_cache or self.home / "cache" / "embed").expanduser()

    @property
    def sessions_dir(self) -> Path:
        """Chat sessions and agent checkpoints (SQLite)."""
        return self.home / "sessions"

    @property
    def runs_dir(self) -> Path:
        """Eval run records."""
        return self.home / "runs"

    @property
    def config_file(self) -> Path:
        return self.home / "config.toml"


def default_home() -> Path:
    """The per-user data directory: XDG on Linux, Application Support on macOS."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "kport"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kport"


def _read_config_file(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid TOML ({err}); fix or delete the file") from err
    unknown = sorted(set(data) - set(_FIELD_ENV))
    if unknown:
        raise ConfigError(
            f"{path}: unknown key {unknown[0]!r}; known keys: {', '.join(sorted(_FIELD_ENV))}"
        )
    return data


def load_settings(overrides: dict | None = None, env: dict | None = None) -> Settings:
    """Build settings from overrides > env > config file > defaults.

    Raises ConfigError naming the variable or file and key when a value is invalid.
    """
    env = os.environ if env is None else env
    home = Path(env.get("KPORT_HOME") or default_home()).expanduser()
    values: dict = {"home": home}
    values.update(_read_config_file(home / "config.toml"))
    for field, var in _FIELD_ENV.items():
        if env.get(var):
            values[field] = env[var]
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return Settings(**values)
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0])
        where = _FIELD_ENV.get(field, field)
        raise ConfigError(f"{where}: {first['msg']} (got {first.get('input')!r})") from err
