import KVWindow.Spec
import KVWindow.Window
import KVWindow.Positions
import KVWindow.Ring
import KVWindow.Attention
import KVWindow.Sinks
import KVWindow.Goldens
import KVWindow.Audit
