"""briefd: an offline-first research daemon (see README.md).

This folder is the package `briefd.daemon`, never a top-level `daemon` (python-daemon's name). In a checkout it
sits on the path as a folder of its own, so `import daemon` would find it: it fails here instead, as it does
where briefd is installed.
"""

if __name__ != "briefd.daemon":
    raise ModuleNotFoundError(f"No module named {__name__!r}: this folder is briefd.daemon", name=__name__)

__version__ = "0.1.0"
