"""EffectiveConfig -> DesiredState: the operand's objects from jinja2 templates. Pure.

    render_operand(config) -> DesiredState

Which components exist is decided in `components.enabled_components`; what their objects
contain is in the templates (`manifests/operand/<component>/*.yaml.j2`), fed with the values
of `context.template_context`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from manager.config import EffectiveConfig
from manager.render.components import COMPONENTS, enabled_components
from manager.render.context import component_contexts
from manager.render.state import APPLY_ORDER, CLUSTER_SCOPED_KINDS, DesiredState
from manager.render.templates import component_templates, render_template

__all__ = [
    "APPLY_ORDER",
    "CLUSTER_SCOPED_KINDS",
    "COMPONENTS",
    "DesiredState",
    "render_operand",
]


def render_operand(config: EffectiveConfig) -> DesiredState:
    """Render every object of every enabled component."""
    components = {}
    for component in enabled_components(config):
        components[component] = tuple(
            annotated(render_template(name, context), config.annotations)
            for context in component_contexts(config, component)
            for name in component_templates(component))
    return DesiredState(namespace=config.namespace, components=MappingProxyType(components))


def annotated(obj: dict[str, Any], annotations: Mapping[str, str]) -> dict[str, Any]:
    """`obj` with the administrator's annotations (controllerConfig.annotations) on its
    metadata and, for a Deployment, on its pod template; the template's own annotations
    (cert-manager's inject-ca-from) win, though the CRD already keeps their keys apart. An
    object without them is returned unchanged: no empty `annotations` appears."""
    if not annotations:
        return obj

    def with_annotations(metadata: Mapping[str, Any]) -> dict[str, Any]:
        return {**metadata, "annotations": {**annotations, **(metadata.get("annotations")
                                                              or {})}}

    result = {**obj, "metadata": with_annotations(obj["metadata"])}
    if obj.get("kind") == "Deployment":
        spec = obj["spec"]
        template = spec["template"]
        result["spec"] = {**spec, "template": {
            **template, "metadata": with_annotations(template.get("metadata") or {})}}
    return result
