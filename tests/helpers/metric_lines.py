"""Trainer output lines of every step/loss format TowerDeck parses, as the trainers print them."""

from __future__ import annotations

CLASSIC = "Step: 201,  Epoch:  1,  Batch: 100 of 550,  Cost: 8.2541,  AvgTime: 3.04ms\n"


TF1_ABSL = "I1121 23:53:47.123456 140 basic_session_run_hooks.py:260] loss = 0.31, step = 100 (0.523 sec)\n"


TF1_INFO = "INFO:tensorflow:loss = 0.25, step = 200 (0.500 sec)\n"


TF1_RATE = "INFO:tensorflow:global_step/sec: 191.2\n"


KERAS_V2 = "Epoch 3/10\n100/100 - 1s - 6ms/step - loss: 0.3100 - accuracy: 0.91\n"


KERAS_V2_B = "Epoch 3/10\n100/100 - 1s 6ms/step - loss: 0.3100 - accuracy: 0.91\n"


KERAS_BAR = (
    "Epoch 2/5\n"
    "\r 1/100 [..............................] - ETA: 5s - loss: 0.9000"
    "\r 1/100 [..............................] - ETA: 5s - loss: 0.9000"
    "\r 37/100 [==========>...................] - ETA: 1s - loss: 0.4521"
    "\r 37/100 [==========>...................] - ETA: 1s - loss: 0.4521"
    "\r 38/100 [==========>...................] - ETA: 1s - loss: 0.4500"
    "\r100/100 [==============================] - ETA: 0s - loss: 0.3105"
    "\r100/100 [==============================] - 1s 6ms/step - loss: 0.3100\n"
)


# Keras 3: unicode bar, ANSI bold, no " - " before the time.
KERAS3_BAR = (
    "Epoch 1/2\n"
    "\r\x1b[1m 37/100\x1b[0m \x1b[32m━━━━━━━\x1b[0m\x1b[37m━━━━━━━━━━━━━\x1b[0m \x1b[1m1s\x1b[0m 5ms/step - accuracy: 0.80 - loss: 0.45"
    "\r\x1b[1m100/100\x1b[0m \x1b[32m━━━━━━━━━━━━━━━━━━━━\x1b[0m\x1b[37m\x1b[0m \x1b[1m1s\x1b[0m 6ms/step - accuracy: 0.91 - loss: 0.31\n"
)


ALL_FORMATS = [CLASSIC, TF1_ABSL, TF1_INFO, TF1_RATE, KERAS_V2, KERAS_V2_B, KERAS_BAR, KERAS3_BAR]
