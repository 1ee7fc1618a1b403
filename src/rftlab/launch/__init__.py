"""Arm specs and launchers: an arm spec (data) → a run in the run store, on the ``local``, ``fireworks``
or ``tinker`` backend. Each launcher satisfies ``rftlab.types.Launcher``."""

from rftlab.launch.specs import FireworksJobSettings, SpectrumArmSpec, load_arm_spec

__all__ = ["FireworksJobSettings", "SpectrumArmSpec", "load_arm_spec"]
