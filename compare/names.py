"""Names are data: every string of a results file (a backend's or net's
name, a mode, a device, a layer) is shown escaped for where it is shown.

- terminal(): control and format characters (ANSI escapes, newlines,
  carriage returns, bidi overrides) as visible escapes, so a name can
  neither clear the screen nor forge a table row;
- markdown(): that, and Markdown's and HTML's special characters
  backslash-escaped, so a name renders as its text in the .md pages (the
  HTML is rendered from that Markdown with raw HTML off, so it is escaped
  there too), and in the plots (matplotlib reads `$` as maths).

escaped(result, how) is a copy of a parsed results file with every string
in it escaped `how`: the renderers then need no care of their own.  Both
escapes leave an ordinary name exactly as it is.
"""
from __future__ import annotations

import dataclasses
import re
import unicodedata

_UNSAFE = {"Cc", "Cf", "Zl", "Zp"}   # controls, format characters (bidi, zero-width), line/paragraph separators
# Markdown's specials that act inside a line (`|` is the table's: compare/report/document.py escapes it in cells)
_MARKDOWN = re.compile(r"([\\`*\[\]<&$~])")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")   # 'conv2d_1' keeps its '_': no emphasis


def _visible(ch: str) -> str:
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal(text: str) -> str:
    """`text` with every control or format character as a visible escape."""
    if text.isprintable():
        return text
    return "".join(_visible(ch) if unicodedata.category(ch) in _UNSAFE else ch for ch in text)


def markdown(text: str) -> str:
    """`text` as Markdown that renders as the text itself."""
    text = _MARKDOWN.sub(r"\\\1", terminal(text))
    text = _EDGE_UNDERSCORE.sub(r"\\_", text)
    return "\\" + text if text[:1] in ("#", "+", "-", "=") else text


_TAG = re.compile(r"([<&])(?=[A-Za-z/!?#])")   # where '<' or '&' would open an HTML tag or entity


def prose(text: str) -> str:
    """A string of a results file that is no name (a reason, a setting in the backend's words): its control
    characters visible, and no HTML tag or entity in it left to open (our own texts use Markdown, kept)."""
    return _TAG.sub(r"\\\1", terminal(text))


# the fields of the results model (compare/results.py) that hold names, and the config key that labels a mode
NAMES = {"name", "mode", "platform", "driver", "type", "vendor", "command", "mode_label", "net", "device"}


def for_terminal(result):
    """A parsed results file as the terminal shows it."""
    return escaped(result, terminal)


def for_markdown(result):
    """A parsed results file as the Markdown pages (and the HTML and plots made with them) show it."""
    return _named(result, None)


def _named(obj, field_name):
    if isinstance(obj, str):
        return markdown(obj) if field_name in NAMES else prose(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: _named(getattr(obj, f.name), f.name)
                                           for f in dataclasses.fields(obj) if f.init})
    if isinstance(obj, dict):
        return {_named(k, None): _named(v, k if isinstance(k, str) else None) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if obj and not isinstance(obj[0], (str, dict, list, tuple)) and not dataclasses.is_dataclass(obj[0]):
            return obj   # numbers: a million timings are not copied one by one
        return type(obj)(_named(v, field_name) for v in obj)
    return obj


def escaped(obj, how):
    """A copy of `obj` (a results dataclass, or what it holds) with every string in it, dict keys too,
    passed through `how`."""
    if isinstance(obj, str):
        return how(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: escaped(getattr(obj, f.name), how)
                                           for f in dataclasses.fields(obj) if f.init})
    if isinstance(obj, dict):
        return {escaped(k, how): escaped(v, how) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if obj and not isinstance(obj[0], (str, dict, list, tuple)) and not dataclasses.is_dataclass(obj[0]):
            return obj   # numbers: a million timings are not copied one by one
        return type(obj)(escaped(v, how) for v in obj)
    return obj
