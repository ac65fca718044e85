"""
Two ways the package's docstrings name their objects, made to resolve (a local Sphinx extension).

* An instance attribute is documented as ``:ivar name:`` in its class's docstring (``WriteResult.rollups_gone``),
  which Sphinx renders but gives no link target. Each such entry becomes the target of ``Class.name``, so
  ``:attr:`WriteResult.rollups_gone``` links to its line.
* A docstring names an object as its module imports it (``:class:`BulkWriteError``` in ``bulk.py``), not by the
  name it is documented under (``pynamodb_counters.exceptions.BulkWriteError``). A reference nothing else
  resolves, if it starts with a class's name, is looked up as a leading dot would (``:class:`.BulkWriteError```):
  among the documented objects of its kind whose names end with it. Several matches are a warning, as with the
  dot. A bare lowercase name (``:attr:`reason```) is not guessed at: it must resolve where it is written.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

_CLASSES = frozenset(("class", "exception"))


def ivar_targets(app: Sphinx, doctree: nodes.document) -> None:
    """Make each ``:ivar name:`` entry of a documented class the target of ``module.Class.name``."""
    domain: Any = app.env.get_domain("py")
    for desc in doctree.findall(addnodes.desc):
        if desc.get("domain") != "py" or desc.get("objtype") not in _CLASSES:
            continue
        signature = desc.next_node(addnodes.desc_signature)
        owner = ".".join(part for part in (signature.get("module"), signature.get("fullname")) if part)
        content = desc.next_node(addnodes.desc_content)
        for field_list in content.children:
            if not isinstance(field_list, nodes.field_list):
                continue
            for field in field_list.children:
                if field[0].astext() != "Variables":
                    continue
                # one entry per list item; a single entry is a bare paragraph
                entries = list(field[1].findall(nodes.list_item)) or list(field[1].children[:1])
                for item in entries:
                    name = item.next_node(addnodes.literal_strong)
                    if name is None:
                        continue
                    target = f"{owner}.{name.astext()}"
                    if target in domain.objects or target in doctree.ids:
                        continue
                    item["ids"].append(target)
                    doctree.ids[target] = item
                    domain.note_object(target, "attribute", target, location=item)


def as_with_a_dot(app: Sphinx, env: BuildEnvironment, node: addnodes.pending_xref,
                  contnode: nodes.Element) -> Optional[nodes.Element]:
    """Resolve an unresolved Python reference as ``.name`` would (the documented objects ending with it)."""
    if node.get("refdomain") != "py" or node.hasattr("refspecific"):
        return None
    if not node["reftarget"][:1].isupper():  # a bare ``reason`` or ``key``: too common a name to guess from
        return None
    domain: Any = env.get_domain("py")
    node["refspecific"] = True
    try:
        return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], node["reftarget"], node,
                                   contnode)
    finally:
        del node["refspecific"]


def setup(app: Sphinx) -> Dict[str, Any]:
    app.connect("doctree-read", ivar_targets)
    app.connect("missing-reference", as_with_a_dot)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
