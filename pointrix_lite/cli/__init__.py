"""The command-line tools, the top layer of the package (docs/architecture.md, "Layers").

One module per command, each with ``main(argv) -> exit code`` (installed as ``pointrix-<command>``;
``scripts/<command>.py`` are thin wrappers): ``train``, ``render``, ``export``, ``view``, ``process``.
``common`` holds what they share; ``preflight``, ``summary`` and ``plugins`` serve only them.
Nothing below this package imports it.
"""
