"""``lexkit layouts``: the named layouts (a scheme, pattern and modifiers per layer), one line each,
and the layer modifiers a layer may take (temperatures, sink, token shift, soft cap, attention
variants, ...), each with
its place in the layer and its source. With ``--show SPEC``, what a layout is on a model of
``--layers`` layers trained at ``--train-len`` (every layer written out)."""

from __future__ import annotations

from .. import layouts
from ..attention import modifiers
from ..core import checks
from .table import print_table


def add_parser(sub):
    p = sub.add_parser("layouts", help="list the named layouts (per-layer designs) and layer modifiers",
                       description=__doc__)
    p.add_argument("--show", metavar="SPEC", help="a layout to write out layer by layer, e.g. hwfa:W=16")
    p.add_argument("--layers", type=int, default=4, help="layers of the model --show builds for (default 4)")
    p.add_argument("--train-len", type=int, default=128, help="training length --show builds for (default 128)")
    return p


def run(args) -> int:
    if args.show is not None:
        checks.number("--layers", args.layers, maximum=1 << 16)
        checks.number("--train-len", args.train_len, maximum=checks.MAX_TRAIN_LEN)
        stack = layouts.parse(args.show, n_layers=args.layers, train_len=args.train_len)
        print(f"{args.show} on {args.layers} layers trained at {args.train_len}: {stack.canonical()}")
        print_table([("layer", "scope", "scheme", "pattern", "modifiers")] + [
            (str(i), layer.scope, layer.scheme, layer.pattern.spec, " ".join(m.spec for m in layer.modifiers) or "-")
            for i, layer in enumerate(stack)], "rllll")
        return 0
    print_table([("name", "parameters (defaults)", "layers", "source")] + [
        (name, params, summary, source) for name, params, summary, source in layouts.describe()], "llll")
    print("W=auto: see each layout in docs/layouts.md; written out: SCHEME@PATTERN+MODIFIER+MODIFIER;... "
          "(`lexkit layouts --show SPEC`)")
    print()
    print_table([("modifier", "place", "parameters (defaults)", "what it does", "source")]
                + modifiers.describe(), "lllll")
    print("place: inputs (the normalized input of attention and feed-forward), qkv (the projections), scores "
          "(inside attention), attention (how the scores become the output: an attention variant), output (the "
          "attention output); a layer takes each once, one temperature and one attention variant")
    return 0
