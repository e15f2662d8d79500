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


def _help(name: str, text: str) -> str:
    return f"{text} (default {getattr(_DEFAULTS, name)})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crawler synth",
        description="Write a URL stream from the model of Broder, Najork & Wiener (2003), section 5.2: T threads, "
                    "each request from a global set of popular URLs (alpha), the thread's page and host "
                    "(beta), or a random URL (gamma = 1 - alpha - beta), interleaved round robin. The output "
                    "is a splitter stream log that `crawler replay OUT --trace full` reads.")
    parser.add_argument("out", metavar="OUT", help="directory for the log files (must hold no splitter-*.log)")
    group = parser.add_argument_group("the model")
    group.add_argument("--threads", type=int, default=_DEFAULTS.threads, metavar="N",
                       help=_help("threads", "crawling threads interleaved round robin"))
    group.add_argument("--alpha", type=float, default=_DEFAULTS.alpha, metavar="A",
                       help=_help("alpha", "probability of a URL of the global set G"))
    group.add_argument("--beta", type=float, default=_DEFAULTS.beta, metavar="B",
                       help=_help("beta", "probability of a URL of the thread's page (L'(p)) or host (L''(h))"))
    group.add_argument("--gamma", type=float, default=None, metavar="C",
                       help="probability of a uniformly random URL; must equal 1 - alpha - beta if given")
    group.add_argument("--page-share", type=float, default=_DEFAULTS.page_share, metavar="S",
                       help=_help("page_share", "of the local requests, the share repeating a link of the page"))
    group.add_argument("--global-urls", type=int, default=_DEFAULTS.global_urls, metavar="G",
                       help=_help("global_urls", "|G|, popular URLs shared by all threads"))
    group.add_argument("--zipf", type=float, default=_DEFAULTS.zipf_exponent, metavar="S",
                       help=_help("zipf_exponent", "G's popularity: rank r has weight 1/r^S"))
    group.add_argument("--host-urls", type=int, default=_DEFAULTS.host_urls, metavar="H",
                       help=_help("host_urls", "|L''(h)|, URLs of one host"))
    group.add_argument("--links-per-page", type=int, default=_DEFAULTS.links_per_page, metavar="L",
                       help=_help("links_per_page", "page run length"))
    group.add_argument("--pages-per-host", type=int, default=_DEFAULTS.pages_per_host, metavar="P",
                       help=_help("pages_per_host", "host run length"))
    group.add_argument("--universe", type=_count, default=_DEFAULTS.universe, metavar="U",
                       help=f"URLs the random requests are drawn from, an integer or 2^K "
                            f"(default 2^{_DEFAULTS.universe.bit_length() - 1})")
    stream = parser.add_argument_group("the stream")
    stream.add_argument("--requests", type=_count, default=_DEFAULTS.requests, metavar="R",
                        help=_help("requests", "requests in the interleaved stream, an integer or 2^K"))
    stream.add_argument("--seed", type=int, default=_DEFAULTS.seed, metavar="S",
                        help=_help("seed", "seed of every random draw"))
    return parser


def params_from(args: argparse.Namespace) -> ModelParams:
    """The model's parameters from the parsed arguments; ValueError names a bad one."""
    params = ModelParams(threads=args.threads, alpha=args.alpha, beta=args.beta, page_share=args.page_share,
                         global_urls=args.global_urls, zipf_exponent=args.zipf, host_urls=args.host_urls,
                         links_per_page=args.links_per_page, pages_per_host=args.pages_per_host,
                         universe=args.universe, requests=args.requests, seed=args.seed)
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
