// Keeps kbit_ref a valid library whichever interfaces are built.
namespace kbit::ref {
extern const int kReferenceLibrary = 1;
}
