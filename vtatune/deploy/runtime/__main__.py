"""``python -m vtatune.deploy.runtime DIR ...``: a bundle run by the runtime part alone."""

from vtatune.deploy.runtime._command import main

raise SystemExit(main())
