"""The URLs of a `srcset` attribute, by the HTML standard's "parse a srcset attribute".

`<img srcset="a.jpg 1x, b,c.jpg 2x">` lists image candidates: a URL (which
may contain commas: only a comma *after* the URL ends a candidate, or one
that ends the URL itself) and descriptors (`100w`, `1.5x`, `100h` with a
width). A browser fetches one candidate; an archiving crawler wants them all,
so `srcset_urls` returns every candidate the standard's parser accepts, in
order. A candidate with invalid descriptors (`a.jpg 2`, `a.jpg 1x 2x`,
`a.jpg 0w`) is dropped, as browsers drop it, and counted by the caller as a
candidate it did not take.

Steps and names follow the standard (HTML, "Images", 4.8.4.3.10), so a
reader can check them line by line; tests/property compares this against a
plain transcription.
"""

from __future__ import annotations

import re

_WS = "\t\n\x0c\r "  # ASCII whitespace
_SEPARATORS = re.compile(r"[\t\n\x0c\r ,]*")
_URL = re.compile(r"[^\t\n\x0c\r ]*")
_WORDS = re.compile(r"[^\t\n\x0c\r ]+")
_NON_NEGATIVE_INTEGER = re.compile(r"[0-9]+\Z")
_FLOAT = re.compile(r"-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z")  # "valid floating-point number"


def srcset_urls(value: str) -> tuple[list[str], int]:
    """(URLs of the valid candidates in order, number of candidates dropped for bad descriptors).

    Per image element with a srcset (hot path): regexes find the URL and, in the
    usual case of descriptors without parentheses, the descriptors.
    """
    urls: list[str] = []
    invalid = 0
    n = len(value)
    pos = 0
    while True:
        matched = _SEPARATORS.match(value, pos)
        assert matched is not None  # the pattern matches the empty string
        pos = matched.end()  # splitting loop: whitespace and commas
        if pos >= n:
            return urls, invalid
        matched = _URL.match(value, pos)
        assert matched is not None  # the pattern matches the empty string
        end = matched.end()
        url = value[pos:end]
        pos = end
        if url.endswith(","):
            url = url.rstrip(",")
            descriptors: list[str] = []
        else:
            # Fast path, same result as the tokenizer: up to the next comma with no '(' the
            # descriptors are the whitespace-separated words.
            comma = value.find(",", pos)
            segment = value[pos:] if comma < 0 else value[pos:comma]
            if "(" in segment:
                descriptors = []
                pos = _tokenize_descriptors(value, pos, descriptors)
            else:
                descriptors = _WORDS.findall(segment)
                pos = n if comma < 0 else comma + 1
        if not descriptors or _descriptors_valid(descriptors):
            urls.append(url)
        else:
            invalid += 1


def _tokenize_descriptors(value: str, pos: int, descriptors: list[str]) -> int:
    """The standard's descriptor tokenizer; appends to `descriptors`, returns the new position."""
    n = len(value)
    while pos < n and value[pos] in _WS:
        pos += 1
    current = ""
    state = "in descriptor"
    while True:
        c = value[pos] if pos < n else ""
        if state == "in descriptor":
            if c == "":
                if current:
                    descriptors.append(current)
                return pos
            if c in _WS:
                if current:
                    descriptors.append(current)
                    current = ""
                state = "after descriptor"
            elif c == ",":
                if current:
                    descriptors.append(current)
                return pos + 1
            elif c == "(":
                current += c
                state = "in parens"
            else:
                current += c
        elif state == "in parens":
            if c == "":
                descriptors.append(current)
                return pos
            current += c
            if c == ")":
                state = "in descriptor"
        else:  # after descriptor
            if c == "":
                return pos
            if c not in _WS:
                state = "in descriptor"
                continue  # reconsume this character in descriptor state
        pos += 1


def _descriptors_valid(descriptors: list[str]) -> bool:
    """The standard's descriptor parser: True if the candidate is kept."""
    width = density = height = None
    for d in descriptors:
        last, rest = d[-1:], d[:-1]
        if last == "w":
            if width is not None or density is not None or not _NON_NEGATIVE_INTEGER.match(rest):
                return False
            width = int(rest)
            if width == 0:
                return False
        elif last == "x":
            if width is not None or density is not None or height is not None or not _FLOAT.match(rest):
                return False
            density = float(rest)
            if density < 0:
                return False
        elif last == "h":
            if height is not None or density is not None or not _NON_NEGATIVE_INTEGER.match(rest):
                return False
            height = int(rest)
            if height == 0:
                return False
        else:
            return False
    return not (height is not None and width is None)
