# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The contract's names, generated from dbus/*.xml by scripts/gen-contract.py (make contract).
Do not edit: a test fails when this differs from what the XML makes."""

BUS_NAME = 'org.example.NetActivity'
OBJECT_PATH = '/org/example/NetActivity'
TASK_PATH_PREFIX = '/org/example/NetActivity/tasks/'
ERROR_PREFIX = 'org.example.NetActivity.Error.'
VERSION = 1
PROPERTIES = 'org.freedesktop.DBus.Properties'
OBJECT_MANAGER = 'org.freedesktop.DBus.ObjectManager'


class Error:
    """The agent's own error names."""
    LimitsExceeded = 'org.example.NetActivity.Error.LimitsExceeded'
    TooLarge = 'org.example.NetActivity.Error.TooLarge'
    InvalidURL = 'org.example.NetActivity.Error.InvalidURL'
    HTTP = 'org.example.NetActivity.Error.HTTP'
    Timeout = 'org.example.NetActivity.Error.Timeout'
    NotAnImage = 'org.example.NetActivity.Error.NotAnImage'
    Network = 'org.example.NetActivity.Error.Network'
    Cancelled = 'org.example.NetActivity.Error.Cancelled'
    Offline = 'org.example.NetActivity.Error.Offline'
    NotFound = 'org.example.NetActivity.Error.NotFound'
    Decode = 'org.example.NetActivity.Error.Decode'
    ClientVanished = 'org.example.NetActivity.Error.ClientVanished'
    NotSupported = 'org.example.NetActivity.Error.NotSupported'


class DBusError:
    """The standard error names the contract answers with (org.freedesktop.DBus.Error.*)."""
    InvalidArgs = 'org.freedesktop.DBus.Error.InvalidArgs'
    AccessDenied = 'org.freedesktop.DBus.Error.AccessDenied'
    Failed = 'org.freedesktop.DBus.Error.Failed'
    UnknownMethod = 'org.freedesktop.DBus.Error.UnknownMethod'
    UnknownObject = 'org.freedesktop.DBus.Error.UnknownObject'
    UnknownInterface = 'org.freedesktop.DBus.Error.UnknownInterface'
    UnknownProperty = 'org.freedesktop.DBus.Error.UnknownProperty'
    PropertyReadOnly = 'org.freedesktop.DBus.Error.PropertyReadOnly'
    InvalidSignature = 'org.freedesktop.DBus.Error.InvalidSignature'
    LimitsExceeded = 'org.freedesktop.DBus.Error.LimitsExceeded'
    ServiceUnknown = 'org.freedesktop.DBus.Error.ServiceUnknown'
    NameHasNoOwner = 'org.freedesktop.DBus.Error.NameHasNoOwner'
    NoReply = 'org.freedesktop.DBus.Error.NoReply'
    Timeout = 'org.freedesktop.DBus.Error.Timeout'
    Disconnected = 'org.freedesktop.DBus.Error.Disconnected'
    NoServer = 'org.freedesktop.DBus.Error.NoServer'


class Activity:
    """org.example.NetActivity"""
    INTERFACE = 'org.example.NetActivity'
    # name: (in signature, out signature)
    METHODS = {
        'IncrementActivityCount': ('', ''),
        'DecrementActivityCount': ('', ''),
        'BeginActivity': ('s', 'h'),
        'BeginTask': ('sa{sv}', 'o'),
        'Accounts': ('s', 'a(sstttt)'),
    }
    # name: (type, access)
    PROPERTIES = {
        'Version': ('u', 'read'),
        'Enabled': ('b', 'readwrite'),
        'Visible': ('b', 'read'),
        'State': ('s', 'read'),
        'ActivityCount': ('u', 'read'),
        'ActivationDelay': ('d', 'readwrite'),
        'CompletionDelay': ('d', 'readwrite'),
        'Clients': ('a(ssu)', 'read'),
        'Reasons': ('a{sas}', 'read'),
    }
    # name: signature
    SIGNALS = {
        'Visible': 'b',
    }
    ERRORS = ('org.freedesktop.DBus.Error.InvalidArgs', 'org.freedesktop.DBus.Error.AccessDenied', 'org.example.NetActivity.Error.LimitsExceeded', 'org.example.NetActivity.Error.TooLarge', 'org.freedesktop.DBus.Error.Failed')
    # enumerated strings: every value
    VALUES = {
        'Resource': ('leases', 'tasks', 'listed-tasks', 'tree-readers', 'downloads', 'prefetch-urls', 'decoder-queue', 'bytes-in-flight', 'images', 'pixels', 'disk'),
        'State': ('not-active', 'delaying-start', 'active', 'delaying-end'),
    }
    # dictionaries and a{sv} arguments: key: type
    KEYS = {
        'BeginTaskOption': {'suspended': 'b', 'expected-to-send': 't', 'expected-to-receive': 't', 'desktop-id': 's', 'cancellable': 'b', 'suspendable': 'b'},
    }
    Accounts = 'Accounts'
    ActivationDelay = 'ActivationDelay'
    ActivityCount = 'ActivityCount'
    BeginActivity = 'BeginActivity'
    BeginTask = 'BeginTask'
    Clients = 'Clients'
    CompletionDelay = 'CompletionDelay'
    DecrementActivityCount = 'DecrementActivityCount'
    Enabled = 'Enabled'
    IncrementActivityCount = 'IncrementActivityCount'
    Reasons = 'Reasons'
    State = 'State'
    Version = 'Version'
    Visible = 'Visible'
    RESOURCE_LEASES = 'leases'
    RESOURCE_TASKS = 'tasks'
    RESOURCE_LISTED_TASKS = 'listed-tasks'
    RESOURCE_TREE_READERS = 'tree-readers'
    RESOURCE_DOWNLOADS = 'downloads'
    RESOURCE_PREFETCH_URLS = 'prefetch-urls'
    RESOURCE_DECODER_QUEUE = 'decoder-queue'
    RESOURCE_BYTES_IN_FLIGHT = 'bytes-in-flight'
    RESOURCE_IMAGES = 'images'
    RESOURCE_PIXELS = 'pixels'
    RESOURCE_DISK = 'disk'
    STATE_NOT_ACTIVE = 'not-active'
    STATE_DELAYING_START = 'delaying-start'
    STATE_ACTIVE = 'active'
    STATE_DELAYING_END = 'delaying-end'
    BEGIN_TASK_OPTION_SUSPENDED = 'suspended'
    BEGIN_TASK_OPTION_EXPECTED_TO_SEND = 'expected-to-send'
    BEGIN_TASK_OPTION_EXPECTED_TO_RECEIVE = 'expected-to-receive'
    BEGIN_TASK_OPTION_DESKTOP_ID = 'desktop-id'
    BEGIN_TASK_OPTION_CANCELLABLE = 'cancellable'
    BEGIN_TASK_OPTION_SUSPENDABLE = 'suspendable'


class Downloader:
    """org.example.NetActivity.Downloader"""
    INTERFACE = 'org.example.NetActivity.Downloader'
    # name: (in signature, out signature)
    METHODS = {
        'DownloadImage': ('sa{sv}', 'sob'),
        'FetchImage': ('sa{sv}', 'hta{sv}'),
        'FetchPixels': ('sa{sv}', 'ha{sv}'),
        'CancelDownload': ('s', 'b'),
        'SetPriority': ('ss', 'b'),
        'PrefetchImages': ('asa{sv}', 's'),
        'CancelPrefetch': ('sas', 'u'),
        'RemoveImages': ('s', 'u'),
    }
    # name: (type, access)
    PROPERTIES = {
        'Version': ('u', 'read'),
        'MaximumActiveDownloads': ('u', 'readwrite'),
        'DownloadPrioritization': ('s', 'readwrite'),
        'ActiveDownloads': ('u', 'read'),
        'QueuedDownloads': ('u', 'read'),
        'DiskCapacity': ('t', 'readwrite'),
        'DiskUsage': ('t', 'read'),
        'DiskError': ('s', 'read'),
        'Proxy': ('s', 'read'),
        'Deferred': ('a{sv}', 'read'),
    }
    # name: signature
    SIGNALS = {
        'PrefetchFinished': 'suu',
        'DownloadFinished': 'ssbss',
    }
    ERRORS = ('org.freedesktop.DBus.Error.InvalidArgs', 'org.freedesktop.DBus.Error.AccessDenied', 'org.example.NetActivity.Error.InvalidURL', 'org.example.NetActivity.Error.HTTP', 'org.example.NetActivity.Error.Timeout', 'org.example.NetActivity.Error.TooLarge', 'org.example.NetActivity.Error.NotAnImage', 'org.example.NetActivity.Error.Network', 'org.example.NetActivity.Error.Cancelled', 'org.example.NetActivity.Error.Offline', 'org.example.NetActivity.Error.NotFound', 'org.example.NetActivity.Error.LimitsExceeded', 'org.example.NetActivity.Error.Decode', 'org.freedesktop.DBus.Error.Failed')
    # enumerated strings: every value
    VALUES = {
        'Priority': ('very-low', 'low', 'normal', 'high', 'very-high'),
        'FetchImageSource': ('memory', 'disk', 'network'),
        'FetchPixelsColor': ('srgb', 'as-is'),
        'FetchPixelsFormat': ('B8G8R8A8_PREMULTIPLIED',),
        'FetchPixelsColorSpace': ('srgb', 'as-is'),
        'FetchPixelsColorProfile': ('none', 'icc', 'cicp', 'invalid'),
        'FetchPixelsSource': ('memory', 'disk', 'network'),
        'DownloadPrioritization': ('fifo', 'lifo'),
    }
    # dictionaries and a{sv} arguments: key: type
    KEYS = {
        'DownloadImageOption': {'additional-identifier': 's', 'reload': 'b', 'priority': 's', 'cache-key': 's', 'max-age': 'd'},
        'FetchImageOption': {'additional-identifier': 's', 'reload': 'b', 'priority': 's', 'cache-key': 's', 'max-age': 'd', 'receipt': 's', 'announce': 'b'},
        'FetchImageInfo': {'source': 's', 'content-type': 's', 'http-status': 'u'},
        'FetchPixelsOption': {'additional-identifier': 's', 'reload': 'b', 'priority': 's', 'cache-key': 's', 'max-age': 'd', 'receipt': 's', 'announce': 'b', 'max-width': 'u', 'max-height': 'u', 'color': 's', 'animation': 'b', 'max-frames': 'u'},
        'FetchPixelsInfo': {'width': 'u', 'height': 'u', 'stride': 'u', 'format': 's', 'original-width': 'u', 'original-height': 'u', 'frames': 'u', 'frame-durations': 'au', 'loop-count': 'u', 'color-space': 's', 'color-profile': 's', 'source': 's', 'content-type': 's', 'http-status': 'u'},
        'DeferredKey': {'metered': 'b', 'power-saver': 'b', 'held': 'u', 'prefetch': 'u'},
    }
    ActiveDownloads = 'ActiveDownloads'
    CancelDownload = 'CancelDownload'
    CancelPrefetch = 'CancelPrefetch'
    Deferred = 'Deferred'
    DiskCapacity = 'DiskCapacity'
    DiskError = 'DiskError'
    DiskUsage = 'DiskUsage'
    DownloadFinished = 'DownloadFinished'
    DownloadImage = 'DownloadImage'
    DownloadPrioritization = 'DownloadPrioritization'
    FetchImage = 'FetchImage'
    FetchPixels = 'FetchPixels'
    MaximumActiveDownloads = 'MaximumActiveDownloads'
    PrefetchFinished = 'PrefetchFinished'
    PrefetchImages = 'PrefetchImages'
    Proxy = 'Proxy'
    QueuedDownloads = 'QueuedDownloads'
    RemoveImages = 'RemoveImages'
    SetPriority = 'SetPriority'
    Version = 'Version'
    PRIORITY_VERY_LOW = 'very-low'
    PRIORITY_LOW = 'low'
    PRIORITY_NORMAL = 'normal'
    PRIORITY_HIGH = 'high'
    PRIORITY_VERY_HIGH = 'very-high'
    FETCH_IMAGE_SOURCE_MEMORY = 'memory'
    FETCH_IMAGE_SOURCE_DISK = 'disk'
    FETCH_IMAGE_SOURCE_NETWORK = 'network'
    FETCH_PIXELS_COLOR_SRGB = 'srgb'
    FETCH_PIXELS_COLOR_AS_IS = 'as-is'
    FETCH_PIXELS_FORMAT_B8G8R8A8_PREMULTIPLIED = 'B8G8R8A8_PREMULTIPLIED'
    FETCH_PIXELS_COLOR_SPACE_SRGB = 'srgb'
    FETCH_PIXELS_COLOR_SPACE_AS_IS = 'as-is'
    FETCH_PIXELS_COLOR_PROFILE_NONE = 'none'
    FETCH_PIXELS_COLOR_PROFILE_ICC = 'icc'
    FETCH_PIXELS_COLOR_PROFILE_CICP = 'cicp'
    FETCH_PIXELS_COLOR_PROFILE_INVALID = 'invalid'
    FETCH_PIXELS_SOURCE_MEMORY = 'memory'
    FETCH_PIXELS_SOURCE_DISK = 'disk'
    FETCH_PIXELS_SOURCE_NETWORK = 'network'
    DOWNLOAD_PRIORITIZATION_FIFO = 'fifo'
    DOWNLOAD_PRIORITIZATION_LIFO = 'lifo'
    DOWNLOAD_IMAGE_OPTION_ADDITIONAL_IDENTIFIER = 'additional-identifier'
    DOWNLOAD_IMAGE_OPTION_RELOAD = 'reload'
    DOWNLOAD_IMAGE_OPTION_PRIORITY = 'priority'
    DOWNLOAD_IMAGE_OPTION_CACHE_KEY = 'cache-key'
    DOWNLOAD_IMAGE_OPTION_MAX_AGE = 'max-age'
    FETCH_IMAGE_OPTION_ADDITIONAL_IDENTIFIER = 'additional-identifier'
    FETCH_IMAGE_OPTION_RELOAD = 'reload'
    FETCH_IMAGE_OPTION_PRIORITY = 'priority'
    FETCH_IMAGE_OPTION_CACHE_KEY = 'cache-key'
    FETCH_IMAGE_OPTION_MAX_AGE = 'max-age'
    FETCH_IMAGE_OPTION_RECEIPT = 'receipt'
    FETCH_IMAGE_OPTION_ANNOUNCE = 'announce'
    FETCH_IMAGE_INFO_SOURCE = 'source'
    FETCH_IMAGE_INFO_CONTENT_TYPE = 'content-type'
    FETCH_IMAGE_INFO_HTTP_STATUS = 'http-status'
    FETCH_PIXELS_OPTION_ADDITIONAL_IDENTIFIER = 'additional-identifier'
    FETCH_PIXELS_OPTION_RELOAD = 'reload'
    FETCH_PIXELS_OPTION_PRIORITY = 'priority'
    FETCH_PIXELS_OPTION_CACHE_KEY = 'cache-key'
    FETCH_PIXELS_OPTION_MAX_AGE = 'max-age'
    FETCH_PIXELS_OPTION_RECEIPT = 'receipt'
    FETCH_PIXELS_OPTION_ANNOUNCE = 'announce'
    FETCH_PIXELS_OPTION_MAX_WIDTH = 'max-width'
    FETCH_PIXELS_OPTION_MAX_HEIGHT = 'max-height'
    FETCH_PIXELS_OPTION_COLOR = 'color'
    FETCH_PIXELS_OPTION_ANIMATION = 'animation'
    FETCH_PIXELS_OPTION_MAX_FRAMES = 'max-frames'
    FETCH_PIXELS_INFO_WIDTH = 'width'
    FETCH_PIXELS_INFO_HEIGHT = 'height'
    FETCH_PIXELS_INFO_STRIDE = 'stride'
    FETCH_PIXELS_INFO_FORMAT = 'format'
    FETCH_PIXELS_INFO_ORIGINAL_WIDTH = 'original-width'
    FETCH_PIXELS_INFO_ORIGINAL_HEIGHT = 'original-height'
    FETCH_PIXELS_INFO_FRAMES = 'frames'
    FETCH_PIXELS_INFO_FRAME_DURATIONS = 'frame-durations'
    FETCH_PIXELS_INFO_LOOP_COUNT = 'loop-count'
    FETCH_PIXELS_INFO_COLOR_SPACE = 'color-space'
    FETCH_PIXELS_INFO_COLOR_PROFILE = 'color-profile'
    FETCH_PIXELS_INFO_SOURCE = 'source'
    FETCH_PIXELS_INFO_CONTENT_TYPE = 'content-type'
    FETCH_PIXELS_INFO_HTTP_STATUS = 'http-status'
    DEFERRED_KEY_METERED = 'metered'
    DEFERRED_KEY_POWER_SAVER = 'power-saver'
    DEFERRED_KEY_HELD = 'held'
    DEFERRED_KEY_PREFETCH = 'prefetch'


class ImageCache:
    """org.example.NetActivity.ImageCache"""
    INTERFACE = 'org.example.NetActivity.ImageCache'
    # name: (in signature, out signature)
    METHODS = {
        'AddImage': ('say', ''),
        'AddImageForRequest': ('ssay', ''),
        'AddImageFromFd': ('sh', ''),
        'AddImageFromFdForRequest': ('ssh', ''),
        'LookupImage': ('s', 'bay'),
        'LookupImageForRequest': ('ss', 'bay'),
        'OpenImage': ('s', 'ht'),
        'OpenPixels': ('sa{sv}', 'ha{sv}'),
        'OpenImageForRequest': ('ss', 'ht'),
        'RemoveImage': ('s', 'b'),
        'RemoveImageForRequest': ('ss', 'b'),
        'RemoveAllImages': ('', 'b'),
    }
    # name: (type, access)
    PROPERTIES = {
        'Version': ('u', 'read'),
        'MemoryCapacity': ('t', 'readwrite'),
        'PreferredMemoryUsageAfterPurge': ('t', 'readwrite'),
        'MemoryUsage': ('t', 'read'),
        'DecodedMemoryCapacity': ('t', 'readwrite'),
        'DecodedPreferredMemoryUsageAfterPurge': ('t', 'readwrite'),
        'DecodedMemoryUsage': ('t', 'read'),
        'DecodedStatistics': ('a{st}', 'read'),
        'ImageCount': ('u', 'read'),
        'MemoryUsageByApp': ('a{st}', 'read'),
        'Statistics': ('a{st}', 'read'),
    }
    SIGNALS = {}
    ERRORS = ('org.freedesktop.DBus.Error.InvalidArgs', 'org.freedesktop.DBus.Error.AccessDenied', 'org.example.NetActivity.Error.NotAnImage', 'org.example.NetActivity.Error.TooLarge', 'org.example.NetActivity.Error.NotFound', 'org.example.NetActivity.Error.LimitsExceeded', 'org.example.NetActivity.Error.Decode', 'org.freedesktop.DBus.Error.Failed')
    # enumerated strings: every value
    VALUES = {
        'OpenPixelsColor': ('srgb', 'as-is'),
        'OpenPixelsFormat': ('B8G8R8A8_PREMULTIPLIED',),
        'OpenPixelsColorSpace': ('srgb', 'as-is'),
        'OpenPixelsColorProfile': ('none', 'icc', 'cicp', 'invalid'),
        'OpenPixelsSource': ('memory',),
    }
    # dictionaries and a{sv} arguments: key: type
    KEYS = {
        'OpenPixelsOption': {'max-width': 'u', 'max-height': 'u', 'color': 's', 'animation': 'b', 'max-frames': 'u'},
        'OpenPixelsInfo': {'width': 'u', 'height': 'u', 'stride': 'u', 'format': 's', 'original-width': 'u', 'original-height': 'u', 'frames': 'u', 'frame-durations': 'au', 'loop-count': 'u', 'color-space': 's', 'color-profile': 's', 'source': 's', 'content-type': 's'},
        'DecodedStatisticsKey': {'hits': 't', 'misses': 't', 'insertions': 't', 'evictions': 't', 'pressure-moderate': 't', 'pressure-critical': 't', 'pressure-evictions': 't', 'pressure-bytes-freed': 't', 'decodes': 't', 'decode-failures': 't', 'shared-decodes': 't', 'decoders-started': 't', 'decoders-replaced': 't'},
        'StatisticsKey': {'hits': 't', 'misses': 't', 'insertions': 't', 'evictions': 't', 'pressure-moderate': 't', 'pressure-critical': 't', 'pressure-evictions': 't', 'pressure-bytes-freed': 't'},
    }
    AddImage = 'AddImage'
    AddImageForRequest = 'AddImageForRequest'
    AddImageFromFd = 'AddImageFromFd'
    AddImageFromFdForRequest = 'AddImageFromFdForRequest'
    DecodedMemoryCapacity = 'DecodedMemoryCapacity'
    DecodedMemoryUsage = 'DecodedMemoryUsage'
    DecodedPreferredMemoryUsageAfterPurge = 'DecodedPreferredMemoryUsageAfterPurge'
    DecodedStatistics = 'DecodedStatistics'
    ImageCount = 'ImageCount'
    LookupImage = 'LookupImage'
    LookupImageForRequest = 'LookupImageForRequest'
    MemoryCapacity = 'MemoryCapacity'
    MemoryUsage = 'MemoryUsage'
    MemoryUsageByApp = 'MemoryUsageByApp'
    OpenImage = 'OpenImage'
    OpenImageForRequest = 'OpenImageForRequest'
    OpenPixels = 'OpenPixels'
    PreferredMemoryUsageAfterPurge = 'PreferredMemoryUsageAfterPurge'
    RemoveAllImages = 'RemoveAllImages'
    RemoveImage = 'RemoveImage'
    RemoveImageForRequest = 'RemoveImageForRequest'
    Statistics = 'Statistics'
    Version = 'Version'
    OPEN_PIXELS_COLOR_SRGB = 'srgb'
    OPEN_PIXELS_COLOR_AS_IS = 'as-is'
    OPEN_PIXELS_FORMAT_B8G8R8A8_PREMULTIPLIED = 'B8G8R8A8_PREMULTIPLIED'
    OPEN_PIXELS_COLOR_SPACE_SRGB = 'srgb'
    OPEN_PIXELS_COLOR_SPACE_AS_IS = 'as-is'
    OPEN_PIXELS_COLOR_PROFILE_NONE = 'none'
    OPEN_PIXELS_COLOR_PROFILE_ICC = 'icc'
    OPEN_PIXELS_COLOR_PROFILE_CICP = 'cicp'
    OPEN_PIXELS_COLOR_PROFILE_INVALID = 'invalid'
    OPEN_PIXELS_SOURCE_MEMORY = 'memory'
    OPEN_PIXELS_OPTION_MAX_WIDTH = 'max-width'
    OPEN_PIXELS_OPTION_MAX_HEIGHT = 'max-height'
    OPEN_PIXELS_OPTION_COLOR = 'color'
    OPEN_PIXELS_OPTION_ANIMATION = 'animation'
    OPEN_PIXELS_OPTION_MAX_FRAMES = 'max-frames'
    OPEN_PIXELS_INFO_WIDTH = 'width'
    OPEN_PIXELS_INFO_HEIGHT = 'height'
    OPEN_PIXELS_INFO_STRIDE = 'stride'
    OPEN_PIXELS_INFO_FORMAT = 'format'
    OPEN_PIXELS_INFO_ORIGINAL_WIDTH = 'original-width'
    OPEN_PIXELS_INFO_ORIGINAL_HEIGHT = 'original-height'
    OPEN_PIXELS_INFO_FRAMES = 'frames'
    OPEN_PIXELS_INFO_FRAME_DURATIONS = 'frame-durations'
    OPEN_PIXELS_INFO_LOOP_COUNT = 'loop-count'
    OPEN_PIXELS_INFO_COLOR_SPACE = 'color-space'
    OPEN_PIXELS_INFO_COLOR_PROFILE = 'color-profile'
    OPEN_PIXELS_INFO_SOURCE = 'source'
    OPEN_PIXELS_INFO_CONTENT_TYPE = 'content-type'
    DECODED_STATISTICS_KEY_HITS = 'hits'
    DECODED_STATISTICS_KEY_MISSES = 'misses'
    DECODED_STATISTICS_KEY_INSERTIONS = 'insertions'
    DECODED_STATISTICS_KEY_EVICTIONS = 'evictions'
    DECODED_STATISTICS_KEY_PRESSURE_MODERATE = 'pressure-moderate'
    DECODED_STATISTICS_KEY_PRESSURE_CRITICAL = 'pressure-critical'
    DECODED_STATISTICS_KEY_PRESSURE_EVICTIONS = 'pressure-evictions'
    DECODED_STATISTICS_KEY_PRESSURE_BYTES_FREED = 'pressure-bytes-freed'
    DECODED_STATISTICS_KEY_DECODES = 'decodes'
    DECODED_STATISTICS_KEY_DECODE_FAILURES = 'decode-failures'
    DECODED_STATISTICS_KEY_SHARED_DECODES = 'shared-decodes'
    DECODED_STATISTICS_KEY_DECODERS_STARTED = 'decoders-started'
    DECODED_STATISTICS_KEY_DECODERS_REPLACED = 'decoders-replaced'
    STATISTICS_KEY_HITS = 'hits'
    STATISTICS_KEY_MISSES = 'misses'
    STATISTICS_KEY_INSERTIONS = 'insertions'
    STATISTICS_KEY_EVICTIONS = 'evictions'
    STATISTICS_KEY_PRESSURE_MODERATE = 'pressure-moderate'
    STATISTICS_KEY_PRESSURE_CRITICAL = 'pressure-critical'
    STATISTICS_KEY_PRESSURE_EVICTIONS = 'pressure-evictions'
    STATISTICS_KEY_PRESSURE_BYTES_FREED = 'pressure-bytes-freed'


class Task:
    """org.example.NetActivity.Task"""
    INTERFACE = 'org.example.NetActivity.Task'
    # name: (in signature, out signature)
    METHODS = {
        'Suspend': ('', ''),
        'Resume': ('', ''),
        'Complete': ('s', ''),
        'SetProgress': ('tttt', ''),
        'SetFraction': ('d', ''),
        'RequestCancel': ('', ''),
        'RequestSuspend': ('b', ''),
    }
    # name: (type, access)
    PROPERTIES = {
        'Version': ('u', 'read'),
        'State': ('s', 'read'),
        'Cancellable': ('b', 'read'),
        'Suspendable': ('b', 'read'),
        'Description': ('s', 'read'),
        'Owner': ('s', 'read'),
        'CountOfBytesSent': ('t', 'read'),
        'CountOfBytesExpectedToSend': ('t', 'read'),
        'CountOfBytesReceived': ('t', 'read'),
        'CountOfBytesExpectedToReceive': ('t', 'read'),
        'FractionCompleted': ('d', 'read'),
        'Error': ('s', 'read'),
    }
    # name: signature
    SIGNALS = {
        'CancelRequested': '',
        'SuspendRequested': 'b',
    }
    ERRORS = ('org.freedesktop.DBus.Error.AccessDenied', 'org.freedesktop.DBus.Error.InvalidArgs', 'org.freedesktop.DBus.Error.UnknownObject', 'org.example.NetActivity.Error.LimitsExceeded', 'org.example.NetActivity.Error.ClientVanished', 'org.example.NetActivity.Error.Cancelled', 'org.example.NetActivity.Error.NotSupported')
    # enumerated strings: every value
    VALUES = {
        'State': ('running', 'suspended', 'completed'),
    }
    KEYS = {}
    CancelRequested = 'CancelRequested'
    Cancellable = 'Cancellable'
    Complete = 'Complete'
    CountOfBytesExpectedToReceive = 'CountOfBytesExpectedToReceive'
    CountOfBytesExpectedToSend = 'CountOfBytesExpectedToSend'
    CountOfBytesReceived = 'CountOfBytesReceived'
    CountOfBytesSent = 'CountOfBytesSent'
    Description = 'Description'
    Error = 'Error'
    FractionCompleted = 'FractionCompleted'
    Owner = 'Owner'
    RequestCancel = 'RequestCancel'
    RequestSuspend = 'RequestSuspend'
    Resume = 'Resume'
    SetFraction = 'SetFraction'
    SetProgress = 'SetProgress'
    State = 'State'
    Suspend = 'Suspend'
    SuspendRequested = 'SuspendRequested'
    Suspendable = 'Suspendable'
    Version = 'Version'
    STATE_RUNNING = 'running'
    STATE_SUSPENDED = 'suspended'
    STATE_COMPLETED = 'completed'
