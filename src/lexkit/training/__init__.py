"""The training floor: the run settings (:mod:`.settings`, ``configs``) and presets, the loop
(:mod:`.loop`), its parts (batched seeds, torchrun, the embedding options, position dropping,
stopping rules, TensorBoard, torch.compile) and run directories (:mod:`.runs`)."""
