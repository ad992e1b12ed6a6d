"""Schedule templates for VTA operators: knobs, legality, config <-> schedule. No Optuna.

A :class:`Template` is plain data plus pure functions, so any search strategy can use it:

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.workloads import WORKLOADS
    >>> tpl = get_template(WORKLOADS["conv2d"]["tutorial"], DEFAULT)
    >>> [k.name for k in tpl.knobs][:3]
    ['tile_b', 'tile_h', 'tile_w']
    >>> tpl.legal(tpl.default_config())
    True

(API skeleton: see ``_template.py``.)
"""

from ._template import Knob, Template, get_template

__all__ = ["Knob", "Template", "get_template"]
