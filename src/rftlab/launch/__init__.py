"""Arm specs and launchers: an arm spec (data) → a run in the run store, on the ``local``, ``fireworks``
or ``tinker`` backend. Each launcher satisfies ``rftlab.types.Launcher``. Family code lives in
``rftlab.launch.<family>`` (spec, preflight, local launcher); ``fireworks`` and ``firectl`` serve every
family that launches on Fireworks RFT."""


def launcher_for(backend: str):
    """The launcher of ``backend`` (``local`` or ``fireworks``), with a clear error for anything else."""
    if backend == "local":
        from rftlab.launch.spectrum.local import LocalLauncher

        return LocalLauncher(progress=None)
    if backend == "fireworks":
        from rftlab.launch.fireworks import FireworksLauncher

        return FireworksLauncher()
    raise ValueError(f"unknown backend {backend!r}: use 'local' or 'fireworks'")
