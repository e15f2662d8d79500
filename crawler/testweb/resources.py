"""The web's bodies that are not pages: images, stylesheets, the script, redirect and error pages."""

from __future__ import annotations

import struct
import zlib

CSS_IMAGE_PATH = "/img/0.png"
"""The `url()` of every stylesheet (path-absolute: resolved against the stylesheet's URL)."""


def html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def moved_page(status: int, location: str, path: str) -> bytes:
    """Body of a redirect: a short page naming the Location (its link is not the crawler's: a 3xx
    contributes only its Location)."""
    title = "Moved Permanently" if status == 301 else "Found"
    return (f"<!DOCTYPE html>\n<html><head><title>{status} {title}</title></head><body>\n"
            f"<h1>{title}</h1>\n<p>The document has moved <a href=\"{location}\">here</a>.</p>\n"
            f"<!-- {path} -->\n</body></html>\n").encode()


def error_page(status: int, reason: str, path: str) -> bytes:
    """An error page without links."""
    return (f"<!DOCTYPE html>\n<html><head><title>{status} {reason}</title></head>\n<body>\n"
            f"<h1>{reason}</h1>\n<p>The requested URL {html_escape(path)} was not found on this server "
            f"or could not be served.</p>\n<hr><address>testweb</address>\n</body></html>\n").encode()


def png_body(uid: int, path: str) -> bytes:
    """A valid 1x1 PNG, unique per image (colour and a tEXt chunk naming the path)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rgb = bytes(((uid * 37) % 256, (uid * 91) % 256, (uid * 53) % 256))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"tEXt", b"Comment\x00" + path.encode()) + chunk(b"IDAT", zlib.compress(b"\x00" + rgb))
            + chunk(b"IEND", b""))


def css_body(host_name: str, path: str) -> bytes:
    """A small stylesheet; its one url() is CSS_IMAGE_PATH."""
    return (f"/* {host_name}{path} */\n:root{{--accent:#0a58ca}}\nbody{{margin:0;color:#222}}\n"
            f".site-header{{background:url(\"{CSS_IMAGE_PATH}\") repeat-x}}\n"
            f"nav a{{color:var(--accent);text-decoration:none}}\n@media print{{nav,aside{{display:none}}}}\n").encode()


def app_js(host_name: str) -> bytes:
    return (f"/* app.js for {host_name} */\n(function(){{document.documentElement.className='js';"
            f"var a=document.createElement('a');a.href='/js-made/link.html';}})();\n").encode()
