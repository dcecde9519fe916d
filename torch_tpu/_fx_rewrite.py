"""What the compiled-graph rewrites share (_restride.py, _out_dtype.py): each node whose
target has a handler is replaced by the node its handler builds in its place (None: the
node stays), and the graph is recompiled once if anything changed."""

from typing import Callable

from torch import fx


def replace_nodes(gm: fx.GraphModule, handlers: dict[object, Callable]) -> int:
    """Returns how many nodes were replaced."""
    done = 0
    for node in list(gm.graph.nodes):
        handler = handlers.get(node.target) if node.op == "call_function" else None
        if handler is None:
            continue
        with gm.graph.inserting_before(node):
            replacement = handler(node)
        if replacement is None:
            continue
        node.replace_all_uses_with(replacement)
        gm.graph.erase_node(node)
        done += 1
    if done:
        gm.graph.lint()
        gm.recompile()
    return done
