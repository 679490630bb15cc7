#include "daemon/ui_pages.h"
