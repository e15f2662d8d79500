"""Plain references for crawler.parse tests: written from the standards' text, apart from the product.

- `srcset_reference`, `refresh_reference`: the HTML standard's "parse a srcset
  attribute" and "parse a refresh value", transcribed step by step (slow and
  literal on purpose; tests/property compares the product's parsers to them);
- `css_reference`: CSS URLs by another tinycss2 route than the product's:
  rule by rule (`parse_stylesheet`, then each rule's declarations or nested
  rules), with @import and @namespace read from at-rule preludes at the top
  level only;
- `Html5libReference`: a page's links from html5lib's tree (a spec-compliant
  tree builder independent of Lexbor) with the default link sources written
  out here again, not imported.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import ada_url
import html5lib
import tinycss2

from crawler.urls import canonicalize

ASCII_WHITESPACE = "\t\n\x0c\r "
DIGITS = "0123456789"


# --- srcset ----------------------------------------------------------------------------

def _is_valid_non_negative_integer(s: str) -> bool:
    return s != "" and all(c in DIGITS for c in s)


def _is_valid_float(s: str) -> bool:
    """HTML "valid floating-point number"."""
    i = 0
    if s[i:i + 1] == "-":
        i += 1
    start = i
    while i < len(s) and s[i] in DIGITS:
        i += 1
    int_digits = i - start
    frac_digits = 0
    if s[i:i + 1] == ".":
        i += 1
        start = i
        while i < len(s) and s[i] in DIGITS:
            i += 1
        frac_digits = i - start
        if frac_digits == 0:
            return False
    if int_digits == 0 and frac_digits == 0:
        return False
    if s[i:i + 1] in ("e", "E"):
        i += 1
        if s[i:i + 1] in ("-", "+"):
            i += 1
        start = i
        while i < len(s) and s[i] in DIGITS:
            i += 1
        if i == start:
            return False
    return i == len(s)


def srcset_reference(text: str) -> list[str]:
    """URLs of the candidates that "parse a srcset attribute" keeps."""
    position = 0
    candidates: list[str] = []
    while True:
        # 4. splitting loop
        while position < len(text) and (text[position] in ASCII_WHITESPACE or text[position] == ","):
            position += 1
        # 5.
        if position >= len(text):
            return candidates
        # 6.
        url = ""
        while position < len(text) and text[position] not in ASCII_WHITESPACE:
            url += text[position]
            position += 1
        # 7.
        descriptors: list[str] = []
        # 8.
        if url.endswith(","):
            while url.endswith(","):
                url = url[:-1]
        else:
            # 8.1 descriptor tokenizer
            while position < len(text) and text[position] in ASCII_WHITESPACE:
                position += 1
            current = ""
            state = "in descriptor"
            while True:
                c = text[position] if position < len(text) else None  # None is EOF
                if state == "in descriptor":
                    if c is not None and c in ASCII_WHITESPACE:
                        if current:
                            descriptors.append(current)
                        current = ""
                        state = "after descriptor"
                    elif c == ",":
                        position += 1
                        if current:
                            descriptors.append(current)
                        break
                    elif c == "(":
                        current += c
                        state = "in parens"
                    elif c is None:
                        if current:
                            descriptors.append(current)
                        break
                    else:
                        current += c
                elif state == "in parens":
                    if c == ")":
                        current += c
                        state = "in descriptor"
                    elif c is None:
                        descriptors.append(current)
                        break
                    else:
                        current += c
                elif state == "after descriptor":
                    if c is not None and c in ASCII_WHITESPACE:
                        pass
                    elif c is None:
                        break
                    else:
                        state = "in descriptor"
                        position -= 1
                position += 1
        # 9.-14. descriptor parser
        error = False
        width = density = future_compat_h = None
        for descriptor in descriptors:
            last = descriptor[-1]
            value = descriptor[:-1]
            if last == "w":
                if width is not None or density is not None:
                    error = True
                if not _is_valid_non_negative_integer(value):
                    error = True
                elif int(value) == 0:
                    error = True
                else:
                    width = int(value)
            elif last == "x":
                if width is not None or density is not None or future_compat_h is not None:
                    error = True
                if not _is_valid_float(value):
                    error = True
                elif float(value) < 0:
                    error = True
                else:
                    density = float(value)
            elif last == "h":
                if future_compat_h is not None or density is not None:
                    error = True
                if not _is_valid_non_negative_integer(value):
                    error = True
                elif int(value) == 0:
                    error = True
                else:
                    future_compat_h = int(value)
            else:
                error = True
        if future_compat_h is not None and width is None:
            error = True
        if not error:
            candidates.append(url)


# --- refresh -----------------------------------------------------------------------------

def refresh_reference(text: str) -> str | None:
    """The URL string of "parse a refresh value" (None: failure, or no URL given)."""
    position = 0
    n = len(text)
    while position < n and text[position] in ASCII_WHITESPACE:
        position += 1
    time_string = ""
    while position < n and text[position] in DIGITS:
        time_string += text[position]
        position += 1
    if time_string == "":
        if position >= n or text[position] != ".":
            return None
    while position < n and (text[position] in DIGITS or text[position] == "."):
        position += 1
    url_given = False
    if position < n:
        if not (text[position] in ";," or text[position] in ASCII_WHITESPACE):
            return None
        while position < n and text[position] in ASCII_WHITESPACE:
            position += 1
        if position < n and text[position] in ";,":
            position += 1
        while position < n and text[position] in ASCII_WHITESPACE:
            position += 1
    if position < n:
        url_given = True
        url_string = text[position:]

        def skip_quotes(position: int) -> str:
            quote = ""
            if position < n and text[position] in "'\"":
                quote = text[position]
                position += 1
            url_string = text[position:]
            if quote and quote in url_string:
                url_string = url_string[:url_string.index(quote)]
            return url_string

        if text[position] in "Uu":
            position += 1
            if position < n and text[position] in "Rr":
                position += 1
                if position < n and text[position] in "Ll":
                    position += 1
                    while position < n and text[position] in ASCII_WHITESPACE:
                        position += 1
                    if position < n and text[position] == "=":
                        position += 1
                        while position < n and text[position] in ASCII_WHITESPACE:
                            position += 1
                        url_string = skip_quotes(position)
        else:
            url_string = skip_quotes(position)
    return url_string if url_given else None


# --- CSS, rule by rule ----------------------------------------------------------------------

def _value_urls(tokens, out: list[str]) -> None:
    for tok in tokens:
        if tok.type == "url":
            out.append(tok.value)
        elif tok.type == "function":
            if tok.lower_name == "url":
                args = [a for a in tok.arguments if a.type != "whitespace"]
                if args and args[0].type == "string":
                    out.append(args[0].value)
            elif tok.lower_name in ("image-set", "-webkit-image-set"):
                for arg in tok.arguments:
                    if arg.type == "string":
                        out.append(arg.value)
                    else:
                        _value_urls([arg], out)
            else:
                _value_urls(tok.arguments, out)
        elif tok.type in ("() block", "[] block", "{} block"):
            _value_urls(tok.content, out)


def _declarations_urls(content, out: list[str]) -> None:
    for item in tinycss2.parse_blocks_contents(content, skip_comments=True, skip_whitespace=True):
        if item.type == "declaration":
            _value_urls(item.value, out)
        elif item.type == "qualified-rule":  # CSS nesting
            _value_urls(item.prelude, out)
            _declarations_urls(item.content, out)
        elif item.type == "at-rule":
            _rule_urls(item, out, top=False)


def _rule_urls(rule, out: list[str], top: bool) -> None:
    if rule.type == "qualified-rule":
        _value_urls(rule.prelude, out)
        _declarations_urls(rule.content, out)
    elif rule.type == "at-rule":
        prelude = [t for t in rule.prelude if t.type not in ("whitespace", "comment")]
        if rule.lower_at_keyword == "import":
            if top and prelude and prelude[0].type == "string":
                out.append(prelude[0].value)
            _value_urls(prelude, out)
        elif rule.lower_at_keyword == "namespace":
            pass  # a name, not a resource
        else:
            _value_urls(rule.prelude, out)
        if rule.content is not None:
            if rule.lower_at_keyword in ("media", "supports", "layer", "container", "document", "-moz-document",
                                         "scope", "starting-style"):
                for inner in tinycss2.parse_rule_list(rule.content, skip_comments=True, skip_whitespace=True):
                    _rule_urls(inner, out, top=False)
            else:
                _declarations_urls(rule.content, out)


def css_reference(text: str, declarations: bool = False) -> list[str]:
    """URLs of a stylesheet (or of a style attribute's declarations), `data:` ones left out."""
    out: list[str] = []
    if declarations:
        _declarations_urls(tinycss2.parse_component_value_list(text, skip_comments=True), out)
    else:
        for rule in tinycss2.parse_stylesheet(text, skip_comments=True, skip_whitespace=True):
            _rule_urls(rule, out, top=True)
    return [u for u in out if not u.strip("".join(map(chr, range(0x21))))[:5].lower() == "data:"]


# --- html5lib page reference ------------------------------------------------------------------

PLAIN = {  # element -> its URL attributes, read as one URL each
    "a": ("href",), "area": ("href",), "link": ("href",), "img": ("src",), "frame": ("src",),
    "iframe": ("src",), "embed": ("src",), "source": ("src",), "script": ("src",), "object": ("data",),
    "video": ("src", "poster"), "audio": ("src",), "track": ("src",),
    "body": ("background",), "table": ("background",), "td": ("background",), "th": ("background",),
}
SRCSETS = {"img": "srcset", "source": "srcset", "link": "imagesrcset"}
C0_SPACE = "".join(map(chr, range(0x21)))


def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


class Html5libReference:
    """Walks html5lib's tree in document order and collects raw URL values with what governs them."""

    def __init__(self, text: str) -> None:
        root = html5lib.parse(text, treebuilder="etree", namespaceHTMLElements=False)
        self.base: str | None = None
        self.meta_nofollow = False
        self.items: list[tuple[str, str]] = []  # (kind, value): kind "link", "nofollow", "css", "css-attr"
        self._walk(root)

    def _walk(self, element: ET.Element) -> None:
        for child in element:
            tag = _local(child.tag)
            if tag == "template":
                continue  # inert contents
            self._element(tag, child)
            self._walk(child)

    def _element(self, tag: str, el: ET.Element) -> None:
        attrs = el.attrib
        items = self.items
        if tag == "base" and "href" in attrs and self.base is None:
            self.base = attrs["href"]
        if tag == "meta":
            if attrs.get("name", "").lower() == "robots":
                tokens = attrs.get("content", "").lower().replace(",", " ").split()
                self.meta_nofollow = self.meta_nofollow or "nofollow" in tokens or "none" in tokens
            if attrs.get("http-equiv", "").lower() == "refresh":
                url = refresh_reference(attrs.get("content", ""))
                if url is not None:
                    items.append(("link", url))
        nofollow = tag in ("a", "area", "link") and "nofollow" in attrs.get("rel", "").lower().split()
        kind = "nofollow" if nofollow else "link"
        if tag == "input":
            if attrs.get("type", "").lower() == "image" and "src" in attrs:
                items.append((kind, attrs["src"]))
        elif tag == "form":
            if "action" in attrs and attrs.get("method", "").lower() not in ("post", "dialog"):
                items.append((kind, attrs["action"]))
        else:
            for attr in PLAIN.get(tag, ()):
                if attr in attrs:
                    items.append((kind, attrs[attr]))
            if tag in SRCSETS and SRCSETS[tag] in attrs:
                items.extend((kind, u) for u in srcset_reference(attrs[SRCSETS[tag]]))
        if tag == "style":
            items.extend(("css", u) for u in css_reference("".join(el.itertext())))
        if "style" in attrs:
            items.extend(("css", u) for u in css_reference(attrs["style"], declarations=True))

    def links(self, url: str) -> list[str]:
        """Canonical links (WHATWG join, our canonical form) with the product's rules for what is taken."""
        if self.meta_nofollow:
            return []
        base = url
        if self.base is not None:
            resolved = _resolve_base(self.base, url)
            if resolved is not None and resolved.startswith(("http://", "https://")):
                base = resolved
        out = []
        for kind, value in self.items:
            if kind == "nofollow":
                continue
            if kind == "css":
                stripped = value.strip(C0_SPACE)
                if not stripped or stripped.startswith("#"):
                    continue
            canon = canonicalize(value, base)
            if canon is not None:
                out.append(canon)
        return out


def _resolve_base(href: str, url: str) -> str | None:
    """The base URL itself (fragment and query kept, as the HTML standard's base URL), via ada."""
    try:
        return ada_url.URL(href, url).href
    except ValueError:
        return None
