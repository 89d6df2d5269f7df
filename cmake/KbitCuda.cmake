# Decides whether the CUDA backend is built (KBIT_CUDA=ON|OFF|AUTO) and its architectures.
set(KBIT_CUDA_ENABLED OFF)
