"""EffectiveConfig -> DesiredState: the operand's objects from jinja2 templates. Pure.

    render_operand(config) -> DesiredState

Which components exist is decided in `components.enabled_components`; what their objects
contain is in the templates (`manifests/operand/<component>/*.yaml.j2`), fed with the values
of `context.template_context`.
"""

from __future__ import annotations

from types import MappingProxyType

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
        components[component] = tuple(render_template(name, context)
                                      for context in component_contexts(config, component)
                                      for name in component_templates(component))
    return DesiredState(namespace=config.namespace, components=MappingProxyType(components))
