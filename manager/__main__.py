from manager.cli import main

raise SystemExit(main())
