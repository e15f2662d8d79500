"""Link sources: which element attributes (and which CSS) hold a page's links.

`parse.link_sources` lists entries (docs/parsing.md says why the defaults):
- `name`: the element's usual URL attribute (`a` = a[href], `img` = img[src],
  `form` = form[action], `meta` = meta[refresh], `style` = the CSS text of
  `<style>` elements; `URL_ATTRIBUTE` below);
- `name[attr]`: that attribute; an element may be listed with several
  (`video`, `video[poster]`);
- `*[style]` (or `[style]`): the CSS of every element's `style` attribute.
How a value is read depends on the attribute: `srcset` and `imagesrcset`
by the srcset parser, `style` as CSS declarations, `meta[refresh]` by the
refresh parser (`<meta http-equiv=refresh content=...>`), anything else as
one URL. Two element rules come from the HTML standard: `input[src]` only on
`<input type=image>`; `form[action]` only on GET forms (method missing,
`get` or invalid), since a POST form's action fetched with GET is an error or
a duplicate of the page (measured: docs/parsing.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType

# How a value is read.
URL, SRCSET, CSS_TEXT = "url", "srcset", "css-text"
TEXT = ""  # the element's text (only <style>)
REFRESH_ATTR = "refresh"  # meta[refresh]: the content of <meta http-equiv=refresh>
STYLE_ATTR = "style"

# The URL attribute of each element we know; `name` alone means this one.
URL_ATTRIBUTE = MappingProxyType({
    "a": "href", "area": "href", "link": "href",
    "img": "src", "frame": "src", "iframe": "src", "embed": "src", "source": "src",
    "form": "action",
    "script": "src", "audio": "src", "video": "src", "track": "src", "input": "src",
    "object": "data",
    "body": "background", "table": "background", "td": "background", "th": "background",
    "meta": REFRESH_ATTR, "style": TEXT,
    "blockquote": "cite", "q": "cite", "del": "cite", "ins": "cite",
})
SRCSET_ATTRIBUTES = frozenset(("srcset", "imagesrcset"))
NOFOLLOW_ELEMENTS = frozenset(("a", "area", "link"))  # rel=nofollow applies to these
SPECIAL_ELEMENTS = frozenset(("base",))  # read for its own meaning, never as a link source
ANY_ELEMENT = ("*", "")
# Elements read only under a condition besides the attribute (`condition_holds`).
CONDITIONAL_ELEMENTS = frozenset(("input", "form"))
NOT_GET_METHODS = frozenset(("post", "dialog"))
_ENTRY_RE = re.compile(r"^(\*|[a-z][a-z0-9-]*)?(?:\[([a-z][a-z0-9_-]*)\])?$")


@dataclass(frozen=True)
class Sources:
    """Compiled `parse.link_sources`: per element, its (attribute, how to read) pairs in config order."""
    by_tag: dict[str, tuple[tuple[str, str], ...]]
    style_attributes: bool
    """`*[style]` is listed: every element's style attribute is CSS to read."""
    refresh: bool
    """`meta[refresh]` is listed."""

    def query(self) -> str:
        """One selector that finds, each once and in document order, every element that can hold a
        link: any element with one of the source attributes (the tag and conditions are checked in
        Python), `<style>`, `<base href>`, robots/refresh `<meta>`, and elements whose style
        attribute mentions `url(` or `image-set(`.

        One `:is()` rather than a list of `tag[attr]` selectors: Lexbor tests every selector of a
        list on every element and returns an element once per selector it matches; the single
        `:is()` costs about a third less on real pages and never repeats an element.
        """
        attrs = sorted({attr for specs in self.by_tag.values() for attr, kind in specs if kind != CSS_TEXT})
        parts = [f"[{attr}]" for attr in attrs]
        if any(kind == CSS_TEXT for specs in self.by_tag.values() for _, kind in specs):
            parts.append("style")
        if "href" not in attrs:
            parts.append("base[href]")
        parts.append('meta:is([name="robots" i],[http-equiv="refresh" i])' if self.refresh
                     else 'meta[name="robots" i]')
        if self.style_attributes:
            parts += ['[style*="url(" i]', '[style*="image-set(" i]']  # the test of css.css_urls' first step
        return f":is({','.join(parts)})"


def condition_holds(tag: str, attrs: dict) -> bool:
    """`<input>` is a source only as type=image, `<form>` only as a GET form."""
    if tag == "input":
        return (attrs.get("type") or "").lower() == "image"
    if tag == "form":
        return (attrs.get("method") or "").lower() not in NOT_GET_METHODS
    return True


def compile_sources(entries: list[str]) -> Sources:
    """`Sources` from config entries; ValueError naming `parse.link_sources` and the entry otherwise."""
    by_tag: dict[str, list[tuple[str, str]]] = {}
    style_attributes = False
    seen: set[tuple[str, str]] = set()
    for entry in entries:
        text = entry.strip().lower() if isinstance(entry, str) else ""
        match = _ENTRY_RE.match(text)
        if not text or match is None:
            raise ValueError(f"parse.link_sources: {entry!r} is not an element name "
                             "(e.g. 'a', 'video[poster]' or '*[style]')")
        tag, attr = match.group(1) or "", match.group(2)
        if tag in ANY_ELEMENT:
            if attr != STYLE_ATTR:
                raise ValueError(f"parse.link_sources: {entry!r}: only '*[style]' applies to every element")
            style_attributes = True
            continue
        if attr is None:
            attr = URL_ATTRIBUTE.get(tag)
            if attr is None:
                raise ValueError(
                    f"parse.link_sources: no default URL attribute for {tag!r}; "
                    f"write it as '{tag}[attribute]' or use one of {sorted(URL_ATTRIBUTE)}")
        if tag in SPECIAL_ELEMENTS:
            raise ValueError(f"parse.link_sources: {tag!r} cannot be a link source (it is read as <{tag}>)")
        if tag == "meta" and attr != REFRESH_ATTR:
            raise ValueError(f"parse.link_sources: {entry!r}: <meta> is a link source only as 'meta[refresh]'")
        if (tag, attr) in seen:
            raise ValueError(f"parse.link_sources: {entry!r} names {tag}[{attr or 'text'}] a second time")
        seen.add((tag, attr))
        if tag == "meta":
            continue  # read with <base> and robots <meta>, not as an element of `by_tag`
        if tag == "style" and attr == TEXT:
            kind = CSS_TEXT
        elif attr in SRCSET_ATTRIBUTES:
            kind = SRCSET
        elif attr == STYLE_ATTR:
            raise ValueError(f"parse.link_sources: {entry!r}: style attributes are listed once, as '*[style]'")
        else:
            kind = URL
        by_tag.setdefault(tag, []).append((attr, kind))
    return Sources({tag: tuple(specs) for tag, specs in by_tag.items()}, style_attributes,
                   ("meta", REFRESH_ATTR) in seen)
