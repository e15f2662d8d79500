"""`crawler synth OUT`: write a trace from the paper's model (crawler.replay.synthetic) for `crawler replay`.

It writes OUT/splitter-0-<seq>.log (node 0 of 1, records with no flags)
and prints one JSON line: the files, the requests of each kind, the
parameters, and the replay command to run next.
"""

from __future__ import annotations

import argparse
import json
import sys

from crawler.replay.synthetic import ModelParams, write_log

EXIT_USAGE = 2
_DEFAULTS = ModelParams()


def _count(text: str) -> int:
    """An integer, or 2^K."""
    base, caret, power = text.partition("^")
    try:
        return 2 ** int(power) if caret and base.strip() == "2" else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 2^K, got {text!r}") from None


# (option, ModelParams field, metavar, type, help) of every option that sets one field; --gamma is checked apart.
_MODEL_OPTIONS = (
    ("--threads", "threads", "N", int, "crawling threads"),
    ("--interleave", "interleave", "HOW", str, "round-robin (a link per thread in turn) or random (each request "
                                               "from a uniformly random thread)"),
    ("--alpha", "alpha", "A", float, "probability of a URL of the global set G"),
    ("--beta", "beta", "B", float, "probability of a URL of the thread's page (L'(p)) or host (L''(h))"),
    ("--page-share", "page_share", "S", float, "of the local requests, the share repeating a link of the page"),
    ("--global-urls", "global_urls", "G", int, "|G|, popular URLs shared by all threads"),
    ("--zipf", "zipf_exponent", "S", float, "G's popularity: rank r has weight 1/r^S"),
    ("--host-urls", "host_urls", "H", int, "|L''(h)|, URLs of one host"),
    ("--links-per-page", "links_per_page", "L", int, "page run length"),
    ("--pages-per-host", "pages_per_host", "P", int, "host run length"),
    ("--universe", "universe", "U", _count, "URLs the random requests are drawn from, an integer or 2^K"),
)
_STREAM_OPTIONS = (
    ("--requests", "requests", "R", _count, "requests in the interleaved stream, an integer or 2^K"),
    ("--seed", "seed", "S", int, "seed of every random draw"),
)


def _default_text(value: int | float) -> str:
    power = int(value).bit_length() - 1 if isinstance(value, int) and value > 1 << 20 else -1
    return f"2^{power}" if power >= 0 and value == 1 << power else str(value)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crawler synth",
        description="Write a URL stream from the model of Broder, Najork & Wiener (2003), section 5.2: T threads, "
                    "each request from a global set of popular URLs (alpha), the thread's page and host "
                    "(beta), or a random URL (gamma = 1 - alpha - beta), interleaved into one stream. The output "
                    "is a splitter stream log that `crawler replay OUT --trace full` reads.")
    parser.add_argument("out", metavar="OUT", help="directory for the log files (must hold no splitter-*.log)")
    for title, options in (("the model", _MODEL_OPTIONS), ("the stream", _STREAM_OPTIONS)):
        group = parser.add_argument_group(title)
        for option, name, metavar, kind, text in options:
            default = getattr(_DEFAULTS, name)
            group.add_argument(option, dest=name, type=kind, default=default, metavar=metavar,
                               help=f"{text} (default {_default_text(default)})")
        if title == "the model":
            group.add_argument("--gamma", type=float, default=None, metavar="C",
                               help="probability of a uniformly random URL; must equal 1 - alpha - beta if given")
    return parser


def params_from(args: argparse.Namespace) -> ModelParams:
    """The model's parameters from the parsed arguments; ValueError names a bad one."""
    params = ModelParams(**{name: getattr(args, name) for _, name, _, _, _ in _MODEL_OPTIONS + _STREAM_OPTIONS})
    if args.gamma is not None and abs(args.gamma - params.gamma) > 1e-9:
        raise ValueError(f"--gamma {args.gamma:g} is not 1 - alpha - beta = {params.gamma:g}: give two of the three")
    params.check()
    return params


def main(argv: list[str] | None = None) -> int:
    """Runs `crawler synth` with `argv` (default sys.argv[1:]); returns the exit code."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        params = params_from(args)
        written = write_log(params, args.out)
    except ValueError as exc:
        print(f"crawler synth: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"crawler synth: error: {args.out}: cannot write the log: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    written["out"] = args.out
    written["replay"] = f"crawler replay {args.out} --trace full --threads {params.threads}"
    print(json.dumps(written, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
