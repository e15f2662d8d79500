"""How a page writes each of its links: the form stored in the link table (model.Form) made into an href.

Every form is one way real pages spell a URL (path-absolute, relative, `./`,
absolute, upper-case scheme or host, scheme-relative, with a fragment, a
percent-escape, a dot segment, spaces, an HTML entity, no slash) and each
resolves to the canonical target the manifest expects. The per-link
variation (which fragment, which character escaped) comes from a salt
hashed from the page id, so the same page always reads the same.
"""

from __future__ import annotations

from .model import DIRS, Form, Tls, Web

FRAGMENTS = ("top", "main", "comments", "section-2", "intro", "p3")
_MASK64 = (1 << 64) - 1
_SALT_STEP = 0x9E3779B1  # per-link salt = page salt + i * step (cheap, deterministic)
_SALT_MASK = (1 << 32) - 1
# Plain ints for the per-link loop (enum attribute access costs ~10x an int compare).
_F_PATH_ABS, _F_REL, _F_DOT_REL, _F_ABS, _F_ABS_UPPER, _F_SCHEME_REL, _F_FRAGMENT, _F_PCT, _F_DOTSEG, \
    _F_SPACES, _F_ENTITY, _F_NO_SLASH, _F_SELF_FRAG, _F_SELF_EMPTY = (int(f) for f in Form)


def mix(a: int, b: int) -> int:
    """Deterministic 64-bit hash of two ints (splitmix64 finaliser); no str hash randomisation."""
    x = (a * 0x9E3779B97F4A7C15 + b + 0x632BE59BD9B4E019) & _MASK64
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _MASK64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


Origins = tuple[list[str], list[str], list[str | None], list[str | None]]


class HrefWriter:
    """The hrefs of a page's links, in table order; caches the per-port origin strings of every host."""

    def __init__(self, web: Web) -> None:
        self.web = web
        self._origins: dict[tuple[int, int], Origins] = {}
        # Plain lists: indexing them is faster than numpy scalars in the per-link loop.
        self._url_host = web.url_host.tolist()
        self._content_https = [h.content_https for h in web.hosts]
        self._link_https = [h.link_https for h in web.hosts]

    def origin_lists(self, port: int, tls_port: int = 0) -> Origins:
        """Per host: its link origin, an upper-case variant, and its scheme-relative prefix for an
        http:// and for an https:// base (None where the host does not speak that scheme)."""
        key = (port, tls_port)
        got = self._origins.get(key)
        if got is None:
            hosts = self.web.hosts
            plain = [h.origin(port, tls_port) for h in hosts]
            upper = []
            for i, o in enumerate(plain):
                # Alternate: upper-case scheme only, or scheme and host.
                upper.append("HTTP" + o[4:] if i % 2 else o.upper())
            sr_http = [None if h.tls is Tls.ONLY else "//" + o[7:] for h, o in zip(hosts, plain)]
            sr_https = [None if h.tls is Tls.NONE else f"//{h.name}:{tls_port}" for h in hosts]
            got = self._origins[key] = (plain, upper, sr_http, sr_https)
        return got

    def hrefs(self, uid: int, port: int, tls_port: int = 0) -> tuple[list[str], list[int], list[int], list[int]]:
        """(hrefs, elements, flags, targets) of `uid`'s links, in table order.

        Hot path of serving: one iteration per link, plain ints and local names only.
        """
        web = self.web
        a, b = int(web.link_off[uid]), int(web.link_off[uid + 1])
        tgts = web.link_tgt[a:b].tolist()
        forms = web.link_form[a:b].tolist()
        url_host = self._url_host
        paths = web.url_path
        origins, upper, sr_http, sr_https = self.origin_lists(port, tls_port)
        base = web.bases.get(uid)
        if base is None:
            base_host = url_host[uid]
            here = paths[uid]
            base_dir = here[: here.rfind("/") + 1]
            base_https = self._content_https[base_host]
        else:
            base_host, base_dir = base.host, base.dir
            # An absolute <base href> carries its host's link scheme; a path-absolute one the page's.
            base_https = self._content_https[url_host[uid]] if base.form == 1 else self._link_https[base.host]
        srs = sr_https if base_https else sr_http   # scheme-relative links take the base's scheme
        hrefs: list[str] = []
        append = hrefs.append
        page_salt = mix(uid, 0x5A17)
        nfrag = len(FRAGMENTS)
        for i, tgt in enumerate(tgts):
            form = forms[i]
            th = url_host[tgt]
            if th != base_host:
                if form == _F_ABS or form <= _F_DOT_REL:
                    append(origins[th] + paths[tgt])
                elif form >= _F_SELF_FRAG:
                    append(_self_href(form, page_salt + i * _SALT_STEP))
                else:
                    append(_absolute(form, origins[th], upper[th], srs[th], paths[tgt],
                                     ((page_salt + i * _SALT_STEP) & _SALT_MASK) >> 3))
                continue
            if form == _F_PATH_ABS:
                append(paths[tgt])
            elif form == _F_REL:
                append(relative_ref(base_dir, paths[tgt]))
            elif form == _F_ABS:
                append(origins[th] + paths[tgt])
            elif form == _F_DOT_REL:
                rel = relative_ref(base_dir, paths[tgt])
                append(rel if rel.startswith("../") else "./" + rel)
            elif form >= _F_SELF_FRAG:
                append(_self_href(form, page_salt + i * _SALT_STEP))
            else:
                tp = paths[tgt]
                salt = ((page_salt + i * _SALT_STEP) & _SALT_MASK) >> 3
                if form == _F_FRAGMENT:
                    append(tp + "#" + FRAGMENTS[salt % nfrag])
                elif form == _F_PCT:
                    append(_pct(tp, salt))
                elif form == _F_DOTSEG:
                    append(_dotseg(tp, salt))
                elif form == _F_SPACES:
                    append("  " + tp + " ")
                elif form == _F_ENTITY:
                    append(_entity(tp, salt))
                elif form == _F_NO_SLASH and tp == "/" and salt & 1:
                    append(origins[th])
                else:
                    append(_absolute(form, origins[th], upper[th], srs[th], tp, salt))
        return hrefs, web.link_elem[a:b].tolist(), web.link_flags[a:b].tolist(), tgts


def _absolute(form: int, origin: str, upper: str, scheme_rel: str | None, tp: str, salt: int) -> str:
    """An absolute (or scheme-relative) form of origin + tp; `scheme_rel` is the target's
    scheme-relative prefix for the base's scheme (None: the target does not speak it, write origin + tp)."""
    if form == _F_ABS_UPPER:
        return upper + tp
    if form == _F_SCHEME_REL:
        return (origin if scheme_rel is None else scheme_rel) + tp
    if form == _F_FRAGMENT:
        return origin + tp + "#" + FRAGMENTS[salt % len(FRAGMENTS)]
    if form == _F_PCT:
        return origin + _pct(tp, salt)
    if form == _F_DOTSEG:
        return origin + _dotseg(tp, salt)
    if form == _F_SPACES:
        return " " + origin + tp + "\n"
    if form == _F_NO_SLASH and tp == "/":
        return origin
    return origin + tp


def _self_href(form: int, salt: int) -> str:
    """A link to the page itself: a bare fragment or an empty href."""
    return "#" + FRAGMENTS[(salt >> 5) % len(FRAGMENTS)] if form == _F_SELF_FRAG else ""


def relative_ref(base_dir: str, tp: str) -> str:
    """Relative reference from directory `base_dir` (ends with /) to path `tp`."""
    if tp.startswith(base_dir):
        rel = tp[len(base_dir):]
    elif base_dir == "/":
        rel = tp[1:]
    else:
        b = base_dir.split("/")[1:-1]
        t = tp.split("/")[1:]
        i = 0
        while i < len(b) and i < len(t) - 1 and b[i] == t[i]:
            i += 1
        rel = "../" * (len(b) - i) + "/".join(t[i:])
    return rel or "./"


def _pct(tp: str, salt: int) -> str:
    """Percent-escape one unreserved character of the path (never '/' or '.')."""
    cands = [i for i, c in enumerate(tp) if c.isalnum() or c in "-_~"]
    if not cands:
        return tp
    i = cands[salt % len(cands)]
    esc = f"%{ord(tp[i]):02X}" if salt & 2 else f"%{ord(tp[i]):02x}"
    return tp[:i] + esc + tp[i + 1:]


def _dotseg(tp: str, salt: int) -> str:
    """The path with a removable dot segment."""
    if salt & 4:
        return "/./" + tp[1:]
    return f"/{DIRS[salt % len(DIRS)]}/.." + tp


def _entity(tp: str, salt: int) -> str:
    """One character of the path as an HTML character reference (decoded by the parser)."""
    cands = [i for i, c in enumerate(tp) if c.isalnum()] or [0]
    i = cands[salt % len(cands)]
    return tp[:i] + f"&#{ord(tp[i])};" + tp[i + 1:]
