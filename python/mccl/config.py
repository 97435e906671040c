"""Python side of mccl's configuration: the same settings as the C++
Config and the MCCL_* environment variables, set explicitly.

Every setting MCCL_FOO_BAR is the keyword foo_bar here:

    mccl.init(chunk_bytes="256K", timeout_ms=60000, log_level="INFO")
    mccl.init(mccl.MCCLConfig(algo="allreduce=ring"))

Values are checked at once (a bad one raises MCCLError naming the setting
and what is allowed) and apply to process groups created afterwards. They
beat the environment; settings not given here come from the environment,
then the defaults. Settings of the runtime itself (MCCL_WORKER_THREADS,
MCCL_LOG_LEVEL) take effect only before the first process group.
"""

import difflib

from . import _lib

_PREFIX = "MCCL_"
# (name, default, allowed, doc) for every setting, from the C++ table.
_SETTINGS = {name[len(_PREFIX):].lower(): (name, default, allowed, doc)
             for name, default, allowed, doc in _lib.settings_table()}


def _env_name(key):
    if key not in _SETTINGS:
        close = difflib.get_close_matches(key, list(_SETTINGS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(f"mccl: unknown setting {key!r}{hint}; known: {', '.join(sorted(_SETTINGS))}")
    return _SETTINGS[key][0]


def _to_text(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


class MCCLConfig:
    """A set of explicit mccl settings; unset ones (None) are left to the
    environment and the defaults. Attribute names are the MCCL_* names in
    lower case without the prefix (see MCCLConfig.describe())."""

    __slots__ = tuple(_SETTINGS)

    def __init__(self, **settings):
        for key in _SETTINGS:
            object.__setattr__(self, key, None)
        for key, value in settings.items():
            setattr(self, key, value)

    def __setattr__(self, key, value):
        _env_name(key)  # unknown names are an error, never ignored
        object.__setattr__(self, key, value)

    def items(self):
        """(setting, value) for every setting that is set."""
        return [(k, getattr(self, k)) for k in _SETTINGS if getattr(self, k) is not None]

    def __repr__(self):
        inner = ", ".join(f"{k}={v!r}" for k, v in self.items())
        return f"MCCLConfig({inner})"

    @staticmethod
    def describe():
        """One line per setting: name, default, allowed values, meaning."""
        return "\n".join(f"{key} (MCCL_{key.upper()}, default {d!r}): {doc} Allowed: {allowed}."
                         for key, (_, d, allowed, doc) in _SETTINGS.items())


def init(config=None, **settings):
    """Sets mccl settings explicitly for process groups created from now on.

    `config` is an MCCLConfig; keyword arguments are applied after it. Each
    value is validated at once; on an error nothing of this call is applied.
    """
    pairs = list(config.items()) if config is not None else []
    pairs += list(settings.items())
    names = [(_env_name(k), _to_text(v)) for k, v in pairs if v is not None]
    before = explicit_settings()
    try:
        for name, text in names:
            _lib.call("mccl_set_setting", name.encode(), text.encode())
    except Exception:
        _lib.call("mccl_clear_settings")
        for name, text in before.items():
            _lib.call("mccl_set_setting", name.encode(), text.encode())
        raise


def explicit_settings():
    """{MCCL_* name: value} of the settings made with init() so far."""
    lines = _lib.text("mccl_explicit_settings").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def reset_config():
    """Forgets every setting made from Python (the environment applies again)."""
    _lib.call("mccl_clear_settings")


def get_config():
    """The resolved settings new process groups would get:
    {setting: (value, source)} with source "default", "profile",
    "environment" or "explicit"."""
    out = {}
    for line in _lib.text("mccl_describe_settings").splitlines():
        line = line.strip()
        if not line.startswith(_PREFIX) or "=" not in line:
            continue
        name, rest = line.split("=", 1)
        value, _, source = rest.rpartition(" (")
        out[name[len(_PREFIX):].lower()] = (value, source.rstrip(")"))
    return out
