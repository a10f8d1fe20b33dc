"""Small-size relay.testing workloads for the build tests (CI-friendly shapes)."""
from __future__ import annotations

from kiln.relay import testing

# name -> (builder, input shape); sizes are small so compiling and running stays fast on 2 cores
SMALL_WORKLOADS = {
    "mlp": (lambda: testing.mlp.get_workload(batch_size=2, num_classes=10, image_shape=(1, 8, 8)), (2, 1, 8, 8)),
    "resnet18": (lambda: testing.resnet.get_workload(num_layers=18, batch_size=1, num_classes=10,
                                                     image_shape=(3, 33, 33)), (1, 3, 33, 33)),
    "mobilenet": (lambda: testing.mobilenet.get_workload(batch_size=1, num_classes=10, image_shape=(3, 32, 32)),
                  (1, 3, 32, 32)),
    "vgg11": (lambda: testing.vgg.get_workload(batch_size=1, num_classes=10, image_shape=(3, 32, 32)),
              (1, 3, 32, 32)),
    "squeezenet": (lambda: testing.squeezenet.get_workload(batch_size=1, num_classes=10, image_shape=(3, 48, 48)),
                   (1, 3, 48, 48)),
    "dcgan": (lambda: testing.dcgan.get_workload(batch_size=1, oshape=(3, 64, 64), ngf=4, random_len=10), (1, 10)),
}
