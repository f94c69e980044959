"""The UD treebank registry (installed as the package `xsyn.treebank_registry`)."""
