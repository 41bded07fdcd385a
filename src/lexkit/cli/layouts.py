"""``lexkit layouts``: the named layouts (a scheme, pattern and temperature per layer), one line each,
and the temperatures a layer may take. With ``--show SPEC``, what a layout is on a model of
``--layers`` layers trained at ``--train-len`` (every layer written out)."""

from __future__ import annotations

from .. import checks, layouts
from ..attention import temperature
from .table import print_table


def add_parser(sub):
    p = sub.add_parser("layouts", help="list the named layouts (per-layer designs)", description=__doc__)
    p.add_argument("--show", metavar="SPEC", help="a layout to write out layer by layer, e.g. hwfa:W=16")
    p.add_argument("--layers", type=int, default=4, help="layers of the model --show builds for (default 4)")
    p.add_argument("--train-len", type=int, default=128, help="training length --show builds for (default 128)")
    return p


def run(args) -> int:
    if args.show is not None:
        checks.number("--layers", args.layers, maximum=1 << 16)
        checks.number("--train-len", args.train_len, maximum=checks.MAX_TRAIN_LEN)
        layers = layouts.parse(args.show, n_layers=args.layers, train_len=args.train_len)
        print(f"{args.show} on {args.layers} layers trained at {args.train_len}: {layouts.canonical(layers)}")
        print_table([("layer", "kind", "scheme", "pattern", "temperature", "sink")] + [
            (str(i), layer.kind, layer.scheme, layer.pattern, layer.temperature or "-", "yes" if layer.sink else "-")
            for i, layer in enumerate(layers)], "rlllll")
        return 0
    print_table([("name", "parameters (defaults)", "layers", "source")] + [
        (name, params, summary, source) for name, params, summary, source in layouts.describe()], "llll")
    print("W=auto: see each layout in docs/layouts.md; written out: SCHEME@PATTERN+TEMPERATURE+sink;... "
          "(`lexkit layouts --show SPEC`)")
    print()
    print_table([("temperature", "parameters (defaults)", "factor on a global layer's scores")]
                + temperature.describe(), "lll")
    return 0
