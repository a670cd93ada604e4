# cnn.py — a ResNet-18-style CNN (conv, batch norm, ReLU, residual blocks, global pooling) for traces:
# default batch 16 of 3x224x224 images, 1000 classes.  Threading: single-threaded.
"""ResNet-18-style CNN training steps on CPU (bench/record-traces.sh records one)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

import common
from common import hoff


class Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self, classes, width=64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        chans = [width, 2 * width, 4 * width, 8 * width]
        layers, cin = [], width
        for i, c in enumerate(chans):
            layers.append(nn.Sequential(Basic(cin, c, 1 if i == 0 else 2), Basic(c, c, 1)))
            cin = c
        self.stages = nn.ModuleList(layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.stem(hoff.mark(x, "stem"))
        for i, st in enumerate(self.stages):
            x = st(hoff.mark(x, "S%d" % i))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main():
    p = common.parser(__doc__)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--width", type=int, default=64)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    model = ResNet(args.classes, args.width)
    print("cnn: ResNet-18 layout, width %d, batch %d of 3x%dx%d, %d classes"
          % (args.width, args.batch, args.size, args.size, args.classes))

    def batch():
        return (torch.randn(args.batch, 3, args.size, args.size),), torch.randint(0, args.classes, (args.batch,))

    common.train(model, batch, F.cross_entropy, args)


if __name__ == "__main__":
    main()
