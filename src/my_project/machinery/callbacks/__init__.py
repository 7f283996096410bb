"""Lightning callbacks of the template, one per module; configs/callbacks/ turns each on.

Lightning's own callbacks (ModelCheckpoint, EarlyStopping) are configured there directly.
`schedule_on_resume` is not optional: `run/execute.py` adds it to every resumed fit.
"""
