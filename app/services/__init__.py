"""The service layer, one package per area (a tool's package where one meets it); a package's transactions live in
its `operations.py`. The modules at this level are used by every area and belong to none: context (what a call can
reach), previews (the one preview → confirm mechanism), scope (cwd → project), text (shared text measures)."""
