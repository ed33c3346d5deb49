from ffdesk.cli import main

raise SystemExit(main())
