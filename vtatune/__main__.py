import sys

if getattr(sys.modules["vtatune"], "__file__", None) is None:
    # A folder named vtatune without __init__.py in the working directory (the clone's
    # own folder, run from where it was cloned) comes first on sys.path, and Python makes
    # it a namespace package over the editable install's finder, which still resolves
    # this module: load the package this module belongs to in its place.
    import importlib.util
    from pathlib import Path

    _here = Path(__file__).parent
    _spec = importlib.util.spec_from_file_location(
        "vtatune", _here / "__init__.py", submodule_search_locations=[str(_here)])
    _package = importlib.util.module_from_spec(_spec)
    sys.modules["vtatune"] = _package
    _spec.loader.exec_module(_package)

from vtatune.cli import main  # noqa: E402

status = main()
# A process that started VTA's tsim leaves through its exit hook (os._exit), which must be
# told the status: Python's exit hooks are not.
libvta = sys.modules.get("vtatune.deploy.runtime._libvta")
if libvta is not None:
    libvta.end_process(status)
raise SystemExit(status)
