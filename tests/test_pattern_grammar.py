"""The pattern grammar's ``|`` (:class:`Either`) and ``&`` (:class:`Both`): every printed pattern reads
back (every registered one, and compositions with chains, mixed precedence and parentheses), a parsed
composition's dense mask is the OR/AND of its operands' dense masks, a layout layer takes a composed
pattern, and a bad composition is one ValueError line naming the bad part."""

from __future__ import annotations

import pytest
import torch

from kit import tiny_gpt
from lexkit import attention, layouts, positions
from lexkit.attention import Attention, Both, Either, First
from lexkit.attention.patterns import BCA, PATTERNS, Chunk, Sinks, Window

N = 24  # queries and keys of every mask here


def tree(p: attention.Pattern):
    """A pattern's structure: ``("|", left, right)``, ``("&", left, right)`` or a named pattern's spec."""
    if isinstance(p, (Either, Both)) and p.operator is not None:
        return (p.operator, tree(p.first), tree(p.second))
    return p.spec


def grid(pattern: attention.Pattern, n: int = N) -> torch.Tensor:
    """[n, n] bool: where the dense kernel's additive mask lets a query see a key."""
    scheme = positions.create("none", n_heads=1, head_dim=4)
    mask = Attention(scheme, pattern, torch.arange(n), kernel="dense").dense_mask()  # [1, 1, n, n]
    return torch.isfinite(mask[0, 0])


# -- reading back what is printed ---------------------------------------------------------------
@pytest.mark.parametrize("name", attention.names())
def test_every_registered_pattern_reads_back(name):
    specs = [name] + ([f"{name}:2"] if PATTERNS.get(name).params else [])  # bca:2, first:2, ...
    for p in (attention.create(spec, default_window=8) for spec in specs):
        again = attention.create(p.spec)
        assert again == p and type(again) is type(p) and again.values == p.values, (name, p.spec)
        assert torch.equal(grid(again), grid(p))


def test_first_is_a_registered_pattern_and_sinks_is_first_or_window():
    assert attention.create("first:3") == First(3) and attention.create("first").spec == "first:4"
    assert attention.create("first:4|window:8").reach == attention.create("sinks:8").reach == 8
    assert torch.equal(grid(attention.create("first:4|window:8")), grid(attention.create("sinks:8")))


@pytest.mark.parametrize("spec, want", [
    ("window:64|first:4", ("|", "window:64", "first:4")),
    ("window:8|first:2|chunk:16", ("|", ("|", "window:8", "first:2"), "chunk:16")),  # from the left
    ("window:8&bca:16&chunk:12", ("&", ("&", "window:8", "bca:16"), "chunk:12")),
    ("window:8&bca:16|first:2", ("|", ("&", "window:8", "bca:16"), "first:2")),  # & binds tighter
    ("first:2|window:8&bca:16", ("|", "first:2", ("&", "window:8", "bca:16"))),
    ("(first:2|window:8)&bca:16", ("&", ("|", "first:2", "window:8"), "bca:16")),  # parentheses group
    ("bca:16&(first:2|window:8)", ("&", "bca:16", ("|", "first:2", "window:8"))),
    ("sinks:8,K=2&chunk:16|causal", ("|", ("&", "sinks:8,K=2", "chunk:16"), "causal")),
])
def test_a_composition_parses_to_its_tree_and_prints_back(spec, want):
    p = attention.create(spec)
    assert tree(p) == want and p.spec == spec
    assert attention.create(p.spec) == p and tree(attention.create(p.spec)) == want


def test_spaces_parentheses_and_defaults_are_read_as_one_canonical_spec():
    assert attention.create(" window : 8 | first:2 ").spec == "window:8|first:2"
    assert attention.create("((window:8))|(first:2)").spec == "window:8|first:2"
    assert attention.create("window|first", default_window=16).spec == "window:16|first:4"


@pytest.mark.parametrize("built", [
    Either(First(4), Window(W=64)),
    Either(Window(W=8), Either(First(2), Chunk(W=16))),  # right-nested: reads back as a|b|c from the left
    Both(Window(W=8), Both(BCA(W=16), Chunk(W=12))),
    Both(Either(First(2), Window(W=8)), BCA(W=16)),  # printed (first:2|window:8)&bca:16
    Both(Chunk(W=12), Either(First(2), Window(W=8))),
    Either(Both(Window(W=8), BCA(W=16)), Sinks(W=6, K=2, pos="text")),
    attention.intersect(attention.create("first:2|window:8"), attention.create("chunk:16")),
])
def test_what_the_algebra_builds_reads_back_equal_by_spec_mask_and_bookkeeping(built):
    again = attention.create(built.spec)
    assert again == built and again.spec == built.spec
    assert torch.equal(grid(again), grid(built))
    assert (again.reach, again.sinks) == (built.reach, built.sinks)
    k = torch.arange(N)
    assert all(torch.equal(again.retained(k, q), built.retained(k, q)) for q in range(0, N, 5))


def test_an_and_with_an_or_part_is_printed_in_parentheses():
    assert Both(Either(First(2), Window(W=8)), BCA(W=16)).spec == "(first:2|window:8)&bca:16"
    assert Either(Both(Window(W=8), BCA(W=16)), First(2)).spec == "window:8&bca:16|first:2"
    assert Both(Sinks(W=8, K=2, pos="text"), Chunk(W=16)).spec == "sinks:8,K=2&chunk:16"  # a named pattern


# -- masks --------------------------------------------------------------------------------------
def test_an_or_of_a_window_and_the_first_key_by_hand():
    p = attention.create("window:2|first:1")
    rows = [torch.nonzero(row).flatten().tolist() for row in grid(p, 5)]
    assert rows == [[0], [0, 1], [0, 1, 2], [0, 2, 3], [0, 3, 4]]  # the window's 2 keys and key 0


@pytest.mark.parametrize("spec, combine", [
    ("window:3|first:2", lambda g: g["window:3"] | g["first:2"]),
    ("window:3&bca:8", lambda g: g["window:3"] & g["bca:8"]),
    ("chunk:5|window:2|first:1", lambda g: g["chunk:5"] | g["window:2"] | g["first:1"]),
    ("window:3&bca:8|first:2", lambda g: (g["window:3"] & g["bca:8"]) | g["first:2"]),
    ("first:2|window:3&bca:8", lambda g: g["first:2"] | (g["window:3"] & g["bca:8"])),
    ("(first:2|window:6)&chunk:8", lambda g: (g["first:2"] | g["window:6"]) & g["chunk:8"]),
    ("sinks:4,K=1&chunk:6|window:2", lambda g: (g["sinks:4,K=1"] & g["chunk:6"]) | g["window:2"]),
])
def test_a_parsed_composition_masks_the_or_and_of_its_operands_masks(spec, combine):
    operands = spec.replace("(", "").replace(")", "").replace("&", "|").split("|")
    masks = {text: grid(attention.create(text)) for text in operands}  # each operand on its own
    assert torch.equal(grid(attention.create(spec)), combine(masks)), spec


@pytest.mark.parametrize("spec", ["first:3", "window:8|first:2", "(window:8|first:2)&chunk:16", "window:6&bca:8"])
def test_a_composed_pattern_runs_alike_on_the_dense_and_chunked_kernels(spec):
    model = tiny_gpt("rope", n_layers=1, d_model=16, train_len=16)
    x = torch.randint(0, 256, (1, 40))
    with torch.no_grad():
        dense, chunked = (model(x, pattern=spec, kernel=k) for k in ("dense", "chunked"))
    assert torch.isfinite(dense).all() and torch.allclose(dense, chunked, atol=1e-5)


# -- in a layout --------------------------------------------------------------------------------
def test_a_layout_layer_takes_a_composed_pattern_and_its_modifiers():
    stack = layouts.parse("rope@window:64|first:4+shift;none@causal", n_layers=2, train_len=64)
    assert tree(stack[0].pattern) == ("|", "window:64", "first:4") and [m.name for m in stack[0].modifiers] == ["shift"]
    assert stack[1].pattern.spec == "causal" and [layer.scope for layer in stack] == ["local", "global"]
    assert stack.canonical() == "rope@window:64|first:4+shift;none@causal"
    assert layouts.parse(" rope @ window:64 | first:4 + shift ; none@causal", n_layers=2, train_len=64) == stack


def test_a_parenthesized_composition_in_a_repeated_group_reads_back():
    text = "(rope@(window:16|first:2)&chunk:32+shift)x2;none"
    stack = layouts.parse(text, n_layers=3, train_len=64)
    assert stack.canonical() == "(rope@(window:16|first:2)&chunk:32+shift)x2;none@causal"
    assert layouts.parse(stack.canonical(), n_layers=3, train_len=64) == stack
    assert tree(stack[1].pattern) == ("&", ("|", "window:16", "first:2"), "chunk:32")


def test_an_evaluation_pattern_may_be_a_composition():
    stack = layouts.parse("rope@window:16;none@causal", n_layers=2, train_len=64)
    resolved = stack.resolve("global=window:8|first:2")
    assert [p.spec for p in resolved.layers] == ["window:16", "window:8|first:2"]
    inside = stack.resolve("window:8|first:2")  # inside each layer's own
    assert [p.spec for p in inside.layers] == ["window:16&(window:8|first:2)", "window:8|first:2"]
    assert attention.create(inside.layers[0].spec) == inside.layers[0]


# -- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, must_name", [
    ("window:64|", ["nothing after '|'", "causal", "first"]),
    ("|first:4", ["nothing before '|'", "window"]),
    ("window:64||first:4", ["nothing between '|' and '|'"]),
    ("window:64&|first:4", ["nothing between '&' and '|'"]),
    ("window:64|ring:4", ["operand 'ring:4'", "unknown attention pattern 'ring'", "valid: causal", "first"]),
    ("window:0&first:4", ["operand 'window:0'", "W=0", "> 0"]),
    ("window|first:4", ["operand 'window'", "needs its W"]),  # no training length
    ("(window:64|first:4", ["a '(' without its ')'"]),
    ("window:64|first:4)", ["a ')' without its '('"]),
    ("()", ["nothing between '(' and ')'"]),
    ("window:64(first:4)", ["a '(' right after 'window:64'", "| or &"]),
    ("sinks:64,pos=cache|first:4", ["sinks:64,pos=cache", "cache positions", "pos=text"]),
])
def test_a_bad_composition_is_one_line_naming_the_bad_part(spec, must_name):
    with pytest.raises(ValueError) as info:
        attention.create(spec)
    message = str(info.value)
    assert message.startswith(f"pattern {spec!r}: ") and "\n" not in message
    for part in must_name:
        assert part in message, (spec, message)


@pytest.mark.parametrize("text, must_name", [
    ("rope@window:64|+shift;none", ["layout layer 0", "nothing after '|'"]),
    ("rope@window:64|ring:2+shift;none", ["layout layer 0", "operand 'ring:2'", "valid: causal"]),
    ("rope@window:64;none@causal&()", ["layout layer 1", "nothing between '(' and ')'"]),
    ("rope@window:64;none@causal&(first:4", ["'(' without its ')'"]),  # the layout's own parentheses say so
])
def test_a_bad_composition_in_a_layout_is_one_layout_error_naming_the_layer(text, must_name):
    with pytest.raises(layouts.LayoutError) as info:
        layouts.parse(text, n_layers=2, train_len=64)
    message = str(info.value)
    assert "\n" not in message and all(part in message for part in must_name), message


def test_a_composed_pattern_stays_one_cell_of_a_markdown_table():
    from lexkit.documents.blocks import Table
    from lexkit.documents.render import markdown_table

    text = markdown_table(Table.of(["pattern", "bpb"], [["window:64|first:4", "1.000"]]))
    assert text.splitlines()[2] == "| window:64\\|first:4 | 1.000 |"  # GitHub reads \| as a | in the cell
