"""Arm specs and launchers: an arm spec (data) → a run in the run store, on the ``local``, ``fireworks``
or ``tinker`` backend. Each launcher satisfies ``rftlab.types.Launcher``. Family code lives in
``rftlab.launch.<family>`` (spec, preflight, local launcher); ``fireworks`` and ``firectl`` serve every
family that launches on Fireworks RFT."""


def launcher_for(backend: str, **options):
    """The launcher of ``backend`` (``local``, ``fireworks`` or ``tinker``), with a clear error for anything
    else. ``options`` are the tinker launcher's (``base_model``, ``service``, implementation settings)."""
    if options and backend != "tinker":
        raise ValueError(f"launcher options {sorted(options)} are for the tinker backend only")
    if backend == "local":
        from rftlab.launch.spectrum.local import LocalLauncher

        return LocalLauncher(progress=None)
    if backend == "fireworks":
        from rftlab.launch.fireworks import FireworksLauncher

        return FireworksLauncher()
    if backend == "tinker":
        from rftlab.launch.spectrum.tinker import TinkerLauncher

        return TinkerLauncher(progress=None, **options)
    raise ValueError(f"unknown backend {backend!r}: use 'local', 'fireworks' or 'tinker'")
