"""Python side of mccl's configuration: the same settings as the C++
Config and the MCCL_* environment variables, set explicitly.

Every setting MCCL_FOO_BAR is the keyword foo_bar here:

    mccl.init(chunk_bytes="256K", timeout_ms=60000, log_level="INFO")
    mccl.init(mccl.MCCLConfig(algo="allreduce=ring"))

Values are checked at once, also when an MCCLConfig is built or changed (a
bad one raises MCCLError naming the setting and what is allowed), and apply
to process groups created afterwards: init() after init_process_group warns
that the existing groups keep their settings. They
beat the environment; settings not given here come from the environment,
then the defaults. Settings of the runtime itself (MCCL_WORKER_THREADS,
MCCL_LOG_LEVEL) take effect only before the first process group.
"""

import difflib
import sys
import warnings

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
        name = _env_name(key)  # unknown names are an error, never ignored
        if value is not None:
            _validate(name, _to_text(value))  # a bad value fails here, not at init()
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


def _validate(name, text):
    """Raises MCCLError naming the setting and what is allowed when `text`
    is not a valid value of `name`; changes no setting."""
    before = explicit_settings()
    try:
        _lib.call("mccl_set_setting", name.encode(), text.encode())
    finally:
        _lib.call("mccl_clear_settings")
        for other, value in before.items():
            _lib.call("mccl_set_setting", other.encode(), value.encode())


def _groups_exist():
    """True when torch.distributed already has a default process group
    (torch is not imported for the question)."""
    dist = sys.modules.get("torch.distributed")
    try:
        return bool(dist is not None and dist.is_available() and dist.is_initialized())
    except Exception:  # a torch too old or too odd to answer: assume none
        return False


def init(config=None, **settings):
    """Sets mccl settings explicitly for process groups created from now on.

    `config` is an MCCLConfig; keyword arguments are applied after it. Each
    value is validated at once; on an error nothing of this call is applied.
    """
    pairs = list(config.items()) if config is not None else []
    pairs += list(settings.items())
    names = [(_env_name(k), _to_text(v)) for k, v in pairs if v is not None]
    if names and _groups_exist():
        warnings.warn(
            "mccl.init(" + ", ".join(f"{n[len(_PREFIX):].lower()}={t!r}" for n, t in names)
            + ") after torch.distributed.init_process_group: these settings apply only to "
            "process groups created from now on (new_group, or after destroy_process_group "
            "and a new init_process_group); the existing ones keep theirs. Call mccl.init "
            "before init_process_group.", RuntimeWarning, stacklevel=2)
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
