"""briefd's one import name: `briefd.daemon` (the service) and `briefd.store` (the SQLite store).

The code lives in the top-level folders daemon/ and store/ (DESIGN.md's layout); this package
holds them by symbolic links, and a wheel holds them as briefd/daemon and briefd/store. Nothing
is installed as a top-level `daemon` or `store`: python-daemon installs `daemon`, and two
distributions writing one folder break each other (tests/test_packaging.py checks it).
"""
