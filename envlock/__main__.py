from envlock.cli import main

raise SystemExit(main())
