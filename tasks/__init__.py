"""Task cards: one TOML file per task, read by xsyn (installed as the package `xsyn.task_cards`)."""
