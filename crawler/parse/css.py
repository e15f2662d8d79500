"""URLs in CSS: `url()` tokens, `image-set()` strings and `@import` strings.

Where CSS comes from (DESIGN 2.8, docs/parsing.md): `<style>` elements and
`style=""` attributes of HTML pages (resolved against the page's base), and
fetched `text/css` bodies (resolved against the stylesheet's own URL). This
module only finds the raw URL strings, in source order; `links.py` resolves
and counts them.

What is a URL here (the same rules for a stylesheet and a declaration list):
- every `url(...)` token, quoted (`url("a b.png")`, a function holding a
  string) or not (`url(a\\)b.png)`, escapes decoded), anywhere: properties,
  `@font-face src`, custom properties, nested functions;
- every string directly inside `image-set()` / `-webkit-image-set()`
  (`image-set("a.png" 1x, url(b.png) 2x)`);
- the string after `@import` (`@import "print.css" print;`); `@import url(x)`
  is a url token already;
- not the URL of `@namespace` (a name, never fetched), nor anything inside
  comments or strings (`content: "url(x)"`), nor `data:` URLs (nothing to
  fetch; skipped without being counted).
Tokens come from tinycss2 (CSS Syntax Level 3: escapes, comments, quoted vs
unquoted url tokens, bad urls): `css_urls_reference` tokenizes the whole text
and walks the tokens, and that is the definition.

Speed (hot path: every `<style>` of every page): tinycss2 is pure Python
(about 2.5 MB/s) and real pages carry 50-500 KB of inline CSS, so
tokenizing whole stylesheets would cost ten times the page's tree. So
`css_urls` works on UTF-8 bytes (ASCII lower-casing and `find` at C speed,
whatever the text's characters):
1. a text holding none of `url(`, `image-set(`, `@import` (ASCII case-
   insensitively) has no URL: most `<style>` elements, almost every `style=""`;
2. otherwise a scan jumps (bytes.find) from one comment, string or escape to
   the next up to each candidate, so it knows whether the candidate is code;
   each candidate in code is cut out up to the end of its token or function;
   a plain `url(x)` / `url("x")` slice (no escape, newline or character that
   makes a bad url) is read directly, any other slice goes to tinycss2.
It must give exactly `css_urls_reference`'s URLs: tests/property checks it on
generated stylesheets, tests/unit on all the CSS of the saved pages. The one
thing it does not see is a keyword spelled with escapes (`u\\72l(x)`,
`@\\69mport`), which browsers honour and no real stylesheet writes.
"""

from __future__ import annotations

import re

import tinycss2

# Candidates, ASCII lower case; "-webkit-image-set(" ends in "image-set(".
_URL = b"url("
_IMAGE_SET = b"image-set("
_IMPORT = b"@import"
_NAMESPACE = b"@namespace"
_WEBKIT = b"-webkit-"
_IMAGE_SET_NAMES = frozenset(("image-set", "-webkit-image-set"))
_WHITESPACE = b" \n\t"
_QUOTES = frozenset(b"\"'")
_BACKSLASH = 0x5C
_CLOSE_PAREN = 0x29
# CSS "ident code points" (and the backslash that starts an escape in a name):
# a candidate right after one is part of a longer name (xurl(, --url(, \)url().
_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-\\"
                       + bytes(range(0x80, 0x100)))
_NOT_A_FUNCTION_AFTER = _NAME_BYTES | frozenset(b"@#")  # @url( is an at-keyword, #url( a hash
# A string token's body after its opening quote (CSS Syntax 4.3.5): ends at
# the quote, before an unescaped newline (a bad string), or at the end.
_STRING_REST = {
    0x22: re.compile(rb'(?:[^"\\\n]+|\\[\s\S]?)*"?'),
    0x27: re.compile(rb"(?:[^'\\\n]+|\\[\s\S]?)*'?"),
}
# An unquoted url token's body after `url(` (4.3.6): up to the first ')' not
# taken by an escape, or the end.
_URL_REST = re.compile(rb"(?:[^)\\]+|\\[\s\S]?)*\)?")
# Inside a function: what opens or closes blocks, or starts a comment, string,
# escape or url token (on the lower-cased bytes).
_INNER = re.compile(rb"""[()\[\]{}"'\\]|/\*|url\(""")
_CLOSER = {0x28: 0x29, 0x5B: 0x5D, 0x7B: 0x7D}
_CLOSERS = frozenset(b")]}")
# In an unquoted url token these make a bad url: quotes, '(', whitespace, non-printables.
_BAD_IN_URL = re.compile(rb"[\"'(\s\x00-\x08\x0e-\x1f\x7f]")
_C0_SPACE = "".join(map(chr, range(0x21)))  # what the URL parser strips from both ends


def css_urls(text: str | bytes) -> list[str]:
    """Raw URL strings in a stylesheet or declaration list, in source order (hot path; see module doc).

    `text` is a str, or UTF-8 bytes (a fetched stylesheet, BOM removed).
    """
    css = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    low = css.lower()  # bytes: ASCII-only lower-casing, offsets unchanged
    hits = _candidates(low)
    if not hits:
        return []
    if b"\r" in css or b"\f" in css or b"\0" in css:  # tinycss2's preprocessing, so slices keep their offsets
        css = (css.replace(b"\0", "\ufffd".encode()).replace(b"\r\n", b"\n")
               .replace(b"\r", b"\n").replace(b"\f", b"\n"))
        low = css.lower()
        hits = _candidates(low)
    return _scan(css, low, hits)


def _candidates(low: bytes) -> list[int]:
    """Sorted offsets of `url(`, `image-set(`, `@import`, `@namespace`: three passes at C speed
    ('@' by memchr), none of them when the text has no URL at all."""
    hits: list[int] = []
    for marker in (_URL, _IMAGE_SET):
        i = low.find(marker)
        while i >= 0:
            hits.append(i)
            i = low.find(marker, i + 1)
    i = low.find(b"@")
    while i >= 0:
        if low.startswith(_IMPORT, i) or low.startswith(_NAMESPACE, i):
            hits.append(i)
        i = low.find(b"@", i + 1)
    if not hits or (len(hits) == 1 and low.startswith(_NAMESPACE, hits[0])):
        return []
    hits.sort()
    return hits


def css_urls_reference(text: str | bytes) -> list[str]:
    """The same URLs as `css_urls`, by tokenizing the whole text (the definition; slow)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out: list[str] = []
    _walk(tinycss2.parse_component_value_list(text, skip_comments=True), out)
    return out


def _keep(value: str) -> bool:
    """False for a `data:` URL: it names nothing to fetch (and is most of inline CSS's bytes)."""
    return value.lstrip(_C0_SPACE)[:5].lower() != "data:"


def _walk(tokens, out: list[str]) -> None:
    """Append the URLs of a component-value list (recursively) to `out`."""
    after: str | None = None  # the at-rule whose prelude starts here: import, namespace, namespace-prefix
    for tok in tokens:
        kind = tok.type
        if kind == "whitespace":
            continue
        if after is not None:
            state, after = after, None
            if state == "import" and kind == "string":
                if _keep(tok.value):
                    out.append(tok.value)
                continue
            if state != "import":
                if state == "namespace" and kind == "ident":
                    after = "namespace-prefix"
                    continue
                if kind in ("string", "url") or (kind == "function" and tok.lower_name == "url"):
                    continue  # the namespace name: not a resource
        if kind == "url":
            if _keep(tok.value):
                out.append(tok.value)
        elif kind == "function":
            name = tok.lower_name
            if name == "url":
                for arg in tok.arguments:
                    if arg.type != "whitespace":
                        if arg.type == "string" and _keep(arg.value):
                            out.append(arg.value)
                        break
            elif name in _IMAGE_SET_NAMES:
                for arg in tok.arguments:
                    if arg.type == "string":
                        if _keep(arg.value):
                            out.append(arg.value)
                    else:
                        _walk((arg,), out)
            else:
                _walk(tok.arguments, out)
        elif kind in ("() block", "[] block", "{} block"):
            _walk(tok.content, out)
        elif kind == "at-keyword" and tok.lower_value in ("import", "namespace"):
            after = tok.lower_value


def _scan(css: bytes, low: bytes, hits: list[int]) -> list[str]:
    """The fast path: the context of each candidate by a jump-scan, then its slice read or tokenized."""
    limit = hits[-1]  # openers at or after the last candidate never matter
    out: list[str] = []
    n = len(css)
    pos = 0
    find = css.find
    # Next offset of each context opener at or after pos: -2 = to look up, -1 = none before limit.
    dq = sq = cm = bs = -2
    for hit in hits:
        if hit < pos:
            continue  # inside a slice already taken, or inside a comment, string or escape
        while True:  # skip every comment, string and escape that starts before the hit
            if -1 != dq < pos:
                dq = find(b'"', pos, limit)
            if -1 != sq < pos:
                sq = find(b"'", pos, limit)
            if -1 != cm < pos:
                cm = find(b"/*", pos, limit)
            if -1 != bs < pos:
                bs = find(b"\\", pos, limit)
            first = n
            if 0 <= dq < first:
                first = dq
            if 0 <= sq < first:
                first = sq
            if 0 <= cm < first:
                first = cm
            if 0 <= bs < first:
                first = bs
            if first >= hit:
                break
            if first == cm:
                end = find(b"*/", first + 2)
                pos = n if end < 0 else end + 2
            elif first == bs:
                pos = first + 2
            else:
                matched = _STRING_REST[css[first]].match(css, first + 1)
                assert matched is not None  # the pattern matches the empty string
                pos = matched.end()
            if pos > hit:
                break
        if pos <= hit:
            pos = _take(css, low, hit, out)
    return out


def _take(css: bytes, low: bytes, hit: int, out: list[str]) -> int:
    """Read the candidate at `hit`, which is in code; returns where the scan goes on."""
    n = len(css)
    if css[hit] == 0x40:  # '@': @import / @namespace, unless the name goes on (@imports)
        is_import = low.startswith(_IMPORT, hit)
        name_end = hit + len(_IMPORT if is_import else _NAMESPACE)
        if name_end < n and css[name_end] in _NAME_BYTES:
            return hit + 1
        p = _skip_space_and_comments(css, name_end)
        if not is_import:  # @namespace [prefix] url|string: skip the name unread
            if p < n and css[p] in _NAME_BYTES and css[p] != _BACKSLASH and not low.startswith(_URL, p):
                while p < n and css[p] in _NAME_BYTES:
                    p += 1
                p = _skip_space_and_comments(css, p)
            if low.startswith(_URL, p):
                return _url_end(css, low, p + len(_URL))
            if p < n and css[p] in _QUOTES:
                matched = _STRING_REST[css[p]].match(css, p + 1)
                assert matched is not None  # the pattern matches the empty string
                return matched.end()
            return p
        if p < n and css[p] in _QUOTES:
            matched = _STRING_REST[css[p]].match(css, p + 1)
            assert matched is not None  # the pattern matches the empty string
            end = matched.end()
            _walk(tinycss2.parse_component_value_list(_text(css, hit, end), skip_comments=True), out)
            return end
        return p  # @import url(...): the url( candidate is read next
    start = hit
    is_url = low.startswith(_URL, hit)
    if not is_url and low.startswith(_WEBKIT, hit - len(_WEBKIT)):
        start = hit - len(_WEBKIT)
    if _inside_name(css, start):
        return hit + 1  # part of a longer name: not this function
    open_end = hit + len(_URL if is_url else _IMAGE_SET)  # just after the '('
    if not is_url:
        end = _function_end(css, low, open_end)
    else:
        end = _url_end(css, low, open_end)
        if _is_data(low, open_end):
            return end  # skipped uncounted, as _walk does: spares tinycss2 a char-by-char walk of kilobytes
        simple = _simple_url(css, open_end, end)
        if simple is not None:
            out.append(simple)
            return end
    _walk(tinycss2.parse_component_value_list(_text(css, start, end), skip_comments=True), out)
    return end


def _inside_name(css: bytes, start: int) -> bool:
    """Does a keyword at `start` continue a name before it (xurl(, --url(, \\)url(, #url(, @url()?"""
    if start == 0:
        return False
    if css[start - 1] in _NOT_A_FUNCTION_AFTER:
        return not css.endswith(b"<!--", 0, start)  # after the CDO token <!-- a name starts afresh
    if start < 2 or css[start - 1] == 0x0A:  # (a backslash before a newline escapes nothing)
        return False
    slashes = start - 2
    while slashes >= 0 and css[slashes] == _BACKSLASH:
        slashes -= 1
    return (start - 2 - slashes) % 2 == 1  # an odd run of backslashes escapes the char before `start`


def _text(css: bytes, start: int, end: int) -> str:
    # Slices start and end at ASCII delimiters, never inside a UTF-8 sequence.
    return css[start:end].decode("utf-8", "replace")


def _simple_url(css: bytes, open_end: int, end: int) -> str | None:
    """The value of `url(x)` / `url("x")` when nothing in it (escape, newline, a character making
    a bad url, a second argument) can make tinycss2 read it otherwise; None then."""
    if css[end - 1] != _CLOSE_PAREN:
        return None
    body = css[open_end:end - 1].strip(_WHITESPACE)
    if not body or b"\\" in body or b"\n" in body:
        return None
    quote = body[0]
    if quote in _QUOTES:
        if len(body) < 2 or body[-1] != quote or body.find(body[:1], 1, len(body) - 1) >= 0:
            return None
        return body[1:-1].decode("utf-8", "replace")
    if _BAD_IN_URL.search(body) is not None:
        return None
    return body.decode("utf-8", "replace")


def _is_data(low: bytes, p: int) -> bool:
    """After `url(`: does the URL, quoted or not, start with `data:`?"""
    n = len(low)
    while p < n and low[p] in _WHITESPACE:
        p += 1
    if p < n and low[p] in _QUOTES:
        p += 1
        while p < n and low[p] <= 0x20:
            p += 1
    return low.startswith(b"data:", p)


def _quoted_after(css: bytes, p: int) -> bool:
    """After `url(`: is the first non-whitespace byte a quote (a url() function, not a url token)?"""
    n = len(css)
    while p < n and css[p] in _WHITESPACE:
        p += 1
    return p < n and css[p] in _QUOTES


def _url_end(css: bytes, low: bytes, p: int) -> int:
    """End of `url(` + what follows from `p`: a url token, or a url() function holding a string."""
    if _quoted_after(css, p):
        return _function_end(css, low, p)
    matched = _URL_REST.match(css, p)
    assert matched is not None  # the pattern matches the empty string
    return matched.end()


def _skip_space_and_comments(css: bytes, p: int) -> int:
    n = len(css)
    while p < n:
        if css[p] in _WHITESPACE:
            p += 1
        elif css.startswith(b"/*", p):
            end = css.find(b"*/", p + 2)
            p = n if end < 0 else end + 2
        else:
            break
    return p


def _function_end(css: bytes, low: bytes, p: int) -> int:
    """Offset just past the `)` closing a function whose arguments start at `p` (blocks nest as in tinycss2)."""
    n = len(css)
    stack = [_CLOSE_PAREN]
    while True:
        m = _INNER.search(low, p)
        if m is None:
            return n
        q = m.start()
        c = low[q]
        if c in _CLOSER:
            stack.append(_CLOSER[c])
            p = q + 1
        elif c in _CLOSERS:
            p = q + 1
            if c == stack[-1]:  # a closer that matches nothing is a parse error tinycss2 skips
                stack.pop()
                if not stack:
                    return p
        elif c in _QUOTES:
            matched = _STRING_REST[c].match(css, q + 1)
            assert matched is not None  # the pattern matches the empty string
            p = matched.end()
        elif c == _BACKSLASH:
            p = q + 2
        elif c == 0x2F:  # '/*'
            end = css.find(b"*/", q + 2)
            p = n if end < 0 else end + 2
        elif _inside_name(css, q):
            p = q + 3  # 'url' ends a longer name; its '(' opens a block, read next
        elif _quoted_after(css, q + len(_URL)):
            stack.append(_CLOSE_PAREN)  # url("..."): a nested function
            p = q + len(_URL)
        else:
            matched = _URL_REST.match(css, q + len(_URL))
            assert matched is not None  # the pattern matches the empty string
            p = matched.end()  # a url token is atomic
