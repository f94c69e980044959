"""GAT pre-training on UD treebanks (`xsyn pretrain-gat`): the trainer, its two objectives' heads
(structural probes, SEPREM's distance prediction) and the probe metrics it is scored by."""
