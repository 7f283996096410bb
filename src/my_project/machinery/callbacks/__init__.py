"""Lightning callbacks of the template, one per module; configs/callbacks/ turns each on.

Lightning's own callbacks (ModelCheckpoint, EarlyStopping) are configured there directly.
"""
