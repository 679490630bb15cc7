#include "daemon/ui_data.h"
