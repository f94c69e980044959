"""The training-loop toolkit shared by fine-tuning (`xsyn.run.train`) and a syntax module's
pre-training (`xsyn.pretraining.trainer`): the learning-rate schedule, global batches split over processes and
accumulation steps, the optimiser step with clipping and the non-finite guard, step records, the
progress bar, and resumable checkpoints.

Its one promise: a run means the same experiment on 1 or N processes and with any number of
accumulation steps (see `loop.py`).
"""
