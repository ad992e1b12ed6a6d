from vtatune.cli import main

raise SystemExit(main())
